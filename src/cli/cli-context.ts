import { InvalidArgumentError, type Command } from "commander";
import type { JournalEntry } from "../engine/store.js";
import type { TetherClient } from "../client/tether-client.js";
import type { RunView } from "../server/api-types.js";
import type { RunStatus } from "../engine/status.js";
import { TetherError } from "../engine/errors.js";
import { needsWorker, workerWaitText } from "../engine/worker-wait.js";
import { connect, type Connection, type GlobalOptions } from "./connection.js";
import { UsageError } from "./exit-codes.js";

/** Where commands write: results to stdout, progress and hints to stderr. */
export interface CliIo {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadStream;
}

export function out(io: CliIo, text: string): void {
  io.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

export function info(io: CliIo, text: string): void {
  io.stderr.write(text.endsWith("\n") ? text : `${text}\n`);
}

/**
 * The global options, where the command line wins over the environment: `--db` over
 * TETHER_DATABASE_URL, `--database-url` over TETHER_DB, and `--url` over either for the commands
 * that talk to a server (`serverNamed`). `--db` and `--database-url` both on the command line are
 * refused (`usage`).
 */
export function globalsOf(command: Command): GlobalOptions {
  const options = { ...command.optsWithGlobals<GlobalOptions>() };
  const source = (key: keyof GlobalOptions) => command.getOptionValueSourceWithGlobals(key);
  if (source("db") === "cli" && source("databaseUrl") === "cli") throw new UsageError("--db and --database-url name two stores: pass one");
  if (source("db") === "cli" && source("databaseUrl") === "env") delete options.databaseUrl;
  if (source("databaseUrl") === "cli" && source("db") === "env") delete options.db;
  if (source("url") === "cli" && source("db") !== "cli" && source("databaseUrl") !== "cli") options.serverNamed = true;
  return options;
}

/** Runs `fn` with a connection, and always closes it. */
export async function withConnection<T>(command: Command, needs: { agents?: boolean; create?: boolean }, fn: (connection: Connection, globals: GlobalOptions) => Promise<T>): Promise<T> {
  const globals = globalsOf(command);
  const connection = await connect(globals, needs);
  try {
    return await fn(connection, globals);
  } finally {
    await connection.close();
  }
}

export function integer(name: string, min = 0, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      const range = max < Number.MAX_SAFE_INTEGER ? ` from ${min} to ${max}` : min > 0 ? ` of at least ${min}` : "";
      throw new InvalidArgumentError(`${name} must be a whole number${range}`);
    }
    return Number(value);
  };
}

export function positiveNumber(name: string): (value: string) => number {
  return (value) => {
    const number = Number(value);
    if (!Number.isFinite(number) || number <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    return number;
  };
}

export function jsonArgument(name: string): (value: string) => unknown {
  return (value) => {
    try {
      return JSON.parse(value) as unknown;
    } catch (error) {
      throw new InvalidArgumentError(`${name} must be JSON (${error instanceof Error ? error.message : String(error)})`);
    }
  };
}

export interface BudgetFlags {
  maxTokens?: number;
  maxCost?: number;
  maxSteps?: number;
  maxTime?: number;
}

export function addBudgetOptions(command: Command): Command {
  return command
    .option("--max-tokens <n>", "token budget (input + output)", integer("--max-tokens", 1))
    .option("--max-cost <usd>", "cost budget in USD", positiveNumber("--max-cost"))
    .option("--max-steps <n>", "step budget", integer("--max-steps", 1))
    .option("--max-time <ms>", "running-time budget in milliseconds", integer("--max-time", 1));
}

export function budgetsFrom(flags: BudgetFlags) {
  const budgets = {
    ...(flags.maxTokens !== undefined ? { maxTokens: flags.maxTokens } : {}),
    ...(flags.maxCost !== undefined ? { maxCostUsd: flags.maxCost } : {}),
    ...(flags.maxSteps !== undefined ? { maxSteps: flags.maxSteps } : {}),
    ...(flags.maxTime !== undefined ? { maxWallTimeMs: flags.maxTime } : {}),
  };
  return Object.keys(budgets).length ? budgets : undefined;
}

export function parseStatusList(value: string): RunStatus[] {
  return value.split(",").map((s) => s.trim()).filter(Boolean) as RunStatus[];
}

/** Why a command on `run` waits for a worker, when it does: none holds the run (a lease run out, or none taken yet). */
function noWorkerText(run: RunView): string | undefined {
  if (run.waitingForWorker) return workerWaitText(run.waitingForWorker);
  if (run.lease === null && needsWorker.includes(run.status)) {
    return "no worker holds it yet: it goes on once one claims it (start one: `tether worker` or `tether serve` on this store)";
  }
  return undefined;
}

/**
 * Follows the run's events after `afterSeq` until its status is one of `targets` (or terminal),
 * passing each journal entry to `onEntry`. Gives up after `timeoutMs`.
 */
export async function waitForStatus(
  client: TetherClient,
  run: RunView,
  targets: readonly RunStatus[],
  options: { timeoutMs: number; onEntry?: (entry: JournalEntry) => void; onWorkerWait?: (text: string) => void },
): Promise<RunView> {
  const done = new Set<string>([...targets, "completed", "failed", "cancelled"]);
  if (done.has(run.status)) return run;
  // No worker holds the run: the command applies once one claims it, which may be never.
  const unheld = noWorkerText(run);
  if (unheld) options.onWorkerWait?.(unheld);
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), options.timeoutMs);
  try {
    for await (const event of client.events(run.id, { after: run.journalSeq, signal: stop.signal })) {
      if (event.type !== "journal") continue;
      options.onEntry?.(event.entry);
      if (event.entry.type === "status" && done.has(String(event.entry.data.to))) break;
    }
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  const latest = await client.get(run.id);
  if (!done.has(latest.status)) {
    const waiting = latest.waitingFor ?? latest.inflight;
    const unheldNow = noWorkerText(latest);
    const on = unheldNow ? `; ${unheldNow}` : waiting ? `, waiting on ${waiting.kind} ${waiting.name}` : "";
    throw new TetherError(
      "wait_timeout",
      `run ${run.id} is still ${latest.status} after ${Math.round(options.timeoutMs / 1000)} s${on}; the command is recorded and will apply: check with \`tether show ${run.id}\``,
      { runId: run.id, timeoutMs: options.timeoutMs, status: latest.status },
    );
  }
  return latest;
}

/** Resolves when the process is asked to stop (SIGINT or SIGTERM); keeps the process alive until then. */
export function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    // The runtime's timers do not hold the process open; this does, until a signal.
    const keepAlive = setInterval(() => undefined, 60_000);
    const onSignal = (signal: string) => {
      clearInterval(keepAlive);
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      resolve(signal);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}
