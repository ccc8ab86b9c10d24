/**
 * A worker process of the crash campaign: executes (and recovers) every run it can claim in
 * the store until the parent kills it with SIGKILL or asks it to stop over IPC.
 * Run as `node --import tsx test/crash/child.ts '<json options>'`.
 */
import { createTether, SqliteStore, type Store } from "../../src/index.js";
import { PostgresStore } from "../../src/stores/pg-store.js";
import { crashAgent, crashFunctionAgent, crashParallelLoopAgent, haltedAgentName, type AgentTimings } from "./agents.js";
import { Ledger } from "./ledger.js";

export interface ChildOptions extends AgentTimings {
  /** The SQLite file, or with `url` and `schema` the PostgreSQL schema, that holds the runs. */
  dbPath?: string;
  url?: string;
  schema?: string;
  ledgerPath: string;
  leaseMs: number;
}

const options = JSON.parse(process.argv[2] ?? "{}") as ChildOptions;
const ledger = new Ledger(options.ledgerPath);
const store: Store = options.url
  ? await new PostgresStore({ connectionString: options.url, schema: options.schema ?? "tether", poolSize: 4 }).open()
  : new SqliteStore({ path: options.dbPath ?? "" });
const runtime = createTether({
  agents: [crashAgent(ledger, options), crashAgent(ledger, options, haltedAgentName), crashFunctionAgent(ledger, options), crashParallelLoopAgent(ledger, options)],
  store,
  leaseMs: options.leaseMs,
  workerPollMs: 20,
  workerId: `worker-pid-${process.pid}`,
});

// A broken promise of the campaign, not a log line: the parent counts it as a violation.
process.on("unhandledRejection", (error) => {
  const text = (error as Error)?.stack ?? String(error);
  process.stderr.write(`child ${process.pid}: unhandled rejection: ${text}\n`);
  process.send?.({ type: "unhandled_rejection", error: text });
});

process.on("message", (message: { type?: string }) => {
  if (message?.type !== "stop") return;
  void (async () => {
    await runtime.close();
    await store.close();
    ledger.close();
    process.exit(0);
  })();
});

runtime.startWorker();
process.send?.({ type: "ready", pid: process.pid });
