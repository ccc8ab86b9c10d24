import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createTether, SqliteStore, TetherError, type Runtime, type Store } from "../../src/index.js";
import { seededRandom, type Random } from "../../src/models/seeded-random.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import { crashAgent, crashAgentName, crashPrompt, haltedAgentName } from "../crash/agents.js";
import { sleep, waitUntil } from "../crash/child-process.js";
import { Ledger } from "../crash/ledger.js";
import { checkSoak, type SoakFigures, type SoakViolation } from "./soak-checker.js";

/**
 * The soak: for a while, runs of the crash campaign's agent (tools that write to a ledger
 * outside the store) execute in a worker while seeded random pause, resume, cancel and say
 * commands land on them from two runtimes, each on its own connection to the store (the
 * worker's own, and a control-only one, as a CLI or a server would be). Half the runs belong to
 * a second agent whose scope is halted and lifted now and then, among the other commands. Then
 * every paused run is resumed until all have ended, and `checkSoak` reads the store and the ledger afresh.
 */

export type SoakStoreKind = "sqlite" | "postgres";

export interface SoakOptions {
  store: SoakStoreKind;
  /** For the SQLite file and the ledger. */
  dir: string;
  seconds: number;
  seed: number;
  /** Runs kept going at once; a run that ends is replaced until time is up. Default 16. */
  activeRuns?: number;
  /** Tool calls per run, drawn from this range. Default [4, 12]. */
  steps?: [number, number];
  /** Commands in flight at once at most. Default 6. */
  parallelCommands?: number;
  /** Keep the data for inspection when there are violations (default true). */
  keepOnViolations?: boolean;
  log?: (line: string) => void;
}

export interface SoakReport {
  store: SoakStoreKind;
  seed: number;
  runs: number;
  /** Commands issued by type (say included), and how the caller saw them end. */
  issued: Record<string, number>;
  answers: Record<string, number>;
  figures: SoakFigures;
  violations: SoakViolation[];
  durationMs: number;
  /** Where the data stays when there were violations (a SQLite folder, or a PostgreSQL schema). */
  kept?: string;
}

type Action = "pause" | "pause-boundary" | "resume" | "cancel" | "say" | "halt" | "unhalt";
/** Cancels are rare, so most runs live through many pauses and resumes before they end. */
const actionWeights: [Action, number][] = [
  ["pause", 30],
  ["pause-boundary", 10],
  ["resume", 36],
  ["say", 20],
  ["cancel", 4],
  // Of the second agent's scope: every run of it at once.
  ["halt", 1],
  ["unhalt", 2],
];

function pickAction(random: Random): Action {
  let r = random() * actionWeights.reduce((n, [, w]) => n + w, 0);
  for (const [action, weight] of actionWeights) {
    r -= weight;
    if (r < 0) return action;
  }
  return "resume";
}

/** Refusals a caller may get when commands race with each other and with the run's own progress. */
const expectedRefusals = new Set(["illegal_transition", "halted"]);

interface Backend {
  open(): Promise<Store>;
  /** Drops the data unless `keep`; returns where it was kept. */
  finish(keep: boolean): Promise<string | undefined>;
}

function sqliteBackend(dir: string): Backend {
  const path = join(dir, "tether.db");
  const opened: SqliteStore[] = [];
  return {
    async open() {
      const store = new SqliteStore({ path });
      opened.push(store);
      return store;
    },
    async finish(keep) {
      for (const store of opened) await store.close();
      return keep ? path : undefined;
    },
  };
}

function postgresBackend(): Backend {
  const db: TempPostgres = tempPostgres("soak");
  const opened: Store[] = [];
  return {
    async open() {
      const store = await db.open().open();
      opened.push(store);
      return store;
    },
    async finish(keep) {
      if (!keep) {
        await db.cleanup();
        return undefined;
      }
      for (const store of opened) await store.close();
      return `${db.url} schema ${db.schema}`;
    },
  };
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  const random = seededRandom(options.seed);
  const [minSteps, maxSteps] = options.steps ?? [4, 12];
  const activeRuns = options.activeRuns ?? 16;
  const parallelCommands = options.parallelCommands ?? 6;
  mkdirSync(options.dir, { recursive: true });
  const ledgerPath = join(options.dir, "ledger.db");
  const backend = options.store === "sqlite" ? sqliteBackend(options.dir) : postgresBackend();
  const ledger = new Ledger(ledgerPath);
  const timings = { tokensPerSecond: 1_500, compensateMs: 10 };
  const agents = () => [crashAgent(ledger, timings), crashAgent(ledger, timings, haltedAgentName)];
  const worker = createTether({ agents: agents(), store: await backend.open(), leaseMs: 2_000, workerPollMs: 20, concurrency: 100, workerId: "soak-worker" });
  const control = createTether({ agents: agents(), store: await backend.open(), worker: false });
  worker.startWorker();
  const runtimes: Runtime[] = [worker, control];

  const issued: Record<string, number> = {};
  const answers: Record<string, number> = {};
  const violations: SoakViolation[] = [];
  const runIds: string[] = [];
  const active = new Set<string>();
  const inFlight = new Set<Promise<void>>();
  let promptSeed = options.seed * 100_000;

  const issue = (runtime: Runtime, runId: string, action: Action): Promise<void> => {
    issued[action] = (issued[action] ?? 0) + 1;
    const command = async () => {
      if (action === "pause") await runtime.pause(runId, { actor: "soak" });
      else if (action === "pause-boundary") await runtime.pause(runId, { actor: "soak", mode: "boundary" });
      else if (action === "resume") await runtime.resume(runId, { actor: "soak" });
      else if (action === "cancel") await runtime.cancel(runId, { actor: "soak" });
      else if (action === "halt") await runtime.halt({ actor: "soak", agent: haltedAgentName });
      else if (action === "unhalt") await runtime.unhalt({ actor: "soak", agent: haltedAgentName });
      else await runtime.say(runId, `note ${Math.floor(random() * 1_000)} from the soak`, { actor: "soak" });
    };
    return command().then(
      () => {
        answers.ok = (answers.ok ?? 0) + 1;
      },
      (error: unknown) => {
        const code = TetherError.isInstance(error) ? error.code : "not a TetherError";
        answers[code] = (answers[code] ?? 0) + 1;
        if (!expectedRefusals.has(code)) violations.push({ rule: "command-outcome", runId, message: `${action} threw ${code}: ${(error as Error)?.message ?? String(error)}` });
      },
    );
  };

  const startRun = async () => {
    const steps = minSteps + Math.floor(random() * (maxSteps - minSteps + 1));
    const runtime = runtimes[Math.floor(random() * runtimes.length)];
    const prompt = crashPrompt("campaign", promptSeed++, steps);
    // A halted agent starts no run (`halted`): then the run is the first agent's.
    const run =
      random() < 0.5
        ? await runtime.start(haltedAgentName, prompt).catch((error: unknown) => {
            if (TetherError.isInstance(error) && error.code === "halted") return runtime.start(crashAgentName, prompt);
            throw error;
          })
        : await runtime.start(crashAgentName, prompt);
    runIds.push(run.id);
    active.add(run.id);
  };

  const deadline = started + options.seconds * 1_000;
  let nextRefresh = 0;
  let nextLog = Date.now() + 10_000;
  try {
    while (Date.now() < deadline) {
      while (active.size < activeRuns) await startRun();
      if (Date.now() >= nextRefresh) {
        for (const id of active) if (["completed", "failed", "cancelled"].includes((await control.get(id)).status)) active.delete(id);
        nextRefresh = Date.now() + 100;
      }
      if (Date.now() >= nextLog) {
        log(`${options.store}: ${runIds.length} runs, ${Object.values(issued).reduce((a, b) => a + b, 0)} commands, ${violations.length} violations so far`);
        nextLog = Date.now() + 10_000;
      }
      const ids = [...active];
      const runId = ids[Math.floor(random() * ids.length)];
      const runtime = runtimes[Math.floor(random() * runtimes.length)];
      const pending = issue(runtime, runId, pickAction(random));
      inFlight.add(pending);
      void pending.finally(() => inFlight.delete(pending));
      if (inFlight.size >= parallelCommands) await Promise.race(inFlight);
      await sleep(2 + Math.floor(random() * 20));
    }
    await Promise.all(inFlight);

    // Time is up: no more commands but resumes, until every run has ended.
    await issue(control, "*", "unhalt");
    log(`${options.store}: draining ${runIds.length} runs`);
    await waitUntil(
      async () => {
        let open = 0;
        for (const id of runIds) {
          const run = await control.get(id);
          if (run.status === "paused" && !run.inflight?.uncertain) await issue(control, id, "resume");
          if (!["completed", "failed", "cancelled"].includes(run.status)) open += 1;
        }
        return open === 0;
      },
      "every run has ended",
      120_000,
      200,
    ).catch((error: unknown) => violations.push({ rule: "stuck", runId: "*", message: (error as Error).message }));
  } catch (error) {
    // A soak that could not run leaves no schema behind.
    await worker.close();
    await control.close();
    await backend.finish(false);
    throw error;
  }
  await worker.close();
  await control.close();

  // The checker reads through a store and a ledger opened for it alone.
  const checkStore = await backend.open();
  const checkLedger = new Ledger(ledgerPath);
  const check = await checkSoak(checkStore, checkLedger, runIds);
  checkLedger.close();
  ledger.close();
  violations.push(...check.violations);
  const kept = await backend.finish(violations.length > 0 && options.keepOnViolations !== false);
  return { store: options.store, seed: options.seed, runs: runIds.length, issued, answers, figures: check.figures, violations, durationMs: Date.now() - started, ...(kept ? { kept } : {}) };
}
