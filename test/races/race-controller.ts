/**
 * A control process of the races campaign: a runtime that executes nothing, on its own
 * connection to the store, that fires the commands it is sent at the moment it is told (the
 * other controllers fire theirs at the same moment) and reports how each call ended.
 * Run as `node --import tsx test/races/race-controller.ts '<json options>'`.
 */
import { createTether, SqliteStore, TetherError, type Store } from "../../src/index.js";
import { PostgresStore } from "../../src/stores/pg-store.js";
import { crashAgent, haltedAgentName } from "../crash/agents.js";
import { Ledger } from "../crash/ledger.js";

export type RaceAction = "pause" | "pause-boundary" | "resume" | "cancel";
/** The kill switch, on the scope of one agent (`halt --agent`): every run of it at once. */
export type ScopeAction = "halt" | "unhalt";

export interface RaceControllerOptions {
  dbPath?: string;
  url?: string;
  schema?: string;
  ledgerPath: string;
}

export interface RaceCommand {
  runId: string;
  action: RaceAction;
  /** Unique per command: the command row is found by it. */
  actor: string;
}

/** A halt or unhalt of `agent`'s scope, fired with a round's commands. */
export interface ScopeCommand {
  action: ScopeAction;
  agent: string;
  actor: string;
}

export interface ScopeAnswer {
  actor: string;
  action: ScopeAction;
  ok: boolean;
  /** The runs it moved: halted, or (unhalt) paused and cancelling. */
  halted?: string[];
  paused?: string[];
  cancelling?: string[];
  code?: string;
  message?: string;
}

export interface RaceAnswer {
  actor: string;
  ok: boolean;
  /** The status the call returned, or the error code it threw. */
  status?: string;
  code?: string;
  message?: string;
  firedAt: number;
}

const options = JSON.parse(process.argv[2] ?? "{}") as RaceControllerOptions;
const ledger = new Ledger(options.ledgerPath);
const store: Store = options.url
  ? await new PostgresStore({ connectionString: options.url, schema: options.schema ?? "tether", poolSize: 6 }).open()
  : new SqliteStore({ path: options.dbPath ?? "" });
const timings = { tokensPerSecond: 400, compensateMs: 10 };
const runtime = createTether({ agents: [crashAgent(ledger, timings), crashAgent(ledger, timings, haltedAgentName)], store, worker: false });

process.on("unhandledRejection", (error) => {
  process.stderr.write(`controller ${process.pid}: unhandled rejection: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(70);
});

async function fire(command: RaceCommand): Promise<RaceAnswer> {
  const firedAt = Date.now();
  const control = { actor: command.actor, reason: "race" };
  try {
    const run =
      command.action === "pause"
        ? await runtime.pause(command.runId, control)
        : command.action === "pause-boundary"
          ? await runtime.pause(command.runId, { ...control, mode: "boundary" })
          : command.action === "resume"
            ? await runtime.resume(command.runId, control)
            : await runtime.cancel(command.runId, control);
    return { actor: command.actor, ok: true, status: run.status, firedAt };
  } catch (error) {
    if (!TetherError.isInstance(error)) throw error;
    return { actor: command.actor, ok: false, code: error.code, message: error.message, firedAt };
  }
}

async function fireScope(command: ScopeCommand): Promise<ScopeAnswer> {
  const control = { actor: command.actor, reason: "race", agent: command.agent };
  try {
    if (command.action === "halt") return { actor: command.actor, action: "halt", ok: true, halted: (await runtime.halt(control)).halted };
    const lifted = await runtime.unhalt(control);
    return { actor: command.actor, action: "unhalt", ok: true, paused: lifted.paused, cancelling: lifted.cancelling };
  } catch (error) {
    if (!TetherError.isInstance(error)) throw error;
    return { actor: command.actor, action: command.action, ok: false, code: error.code, message: error.message };
  }
}

process.on("message", (message: { type?: string; at?: number; commands?: RaceCommand[]; scope?: ScopeCommand[]; round?: number }) => {
  if (message?.type === "fire") {
    const commands = message.commands ?? [];
    const scope = message.scope ?? [];
    setTimeout(
      () => {
        void Promise.all([Promise.all(commands.map(fire)), Promise.all(scope.map(fireScope))]).then(([answers, scopeAnswers]) =>
          process.send?.({ type: "fired", round: message.round, answers, scopeAnswers }),
        );
      },
      Math.max(0, (message.at ?? 0) - Date.now()),
    );
    return;
  }
  if (message?.type !== "stop") return;
  void (async () => {
    await runtime.close();
    await store.close();
    ledger.close();
    process.exit(0);
  })();
});

process.send?.({ type: "ready", pid: process.pid });
