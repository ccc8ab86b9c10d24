/**
 * A `tether worker`-like process on PostgreSQL for the cluster tests: executes runs of the crash
 * campaign's agent with a lease of its own, and reports over IPC every write of its that the
 * database refused for a stale fencing epoch.
 * Run as `node --import tsx test/cluster/pg-worker.ts '<json options>'`.
 */
import { createTether, type Store } from "../../src/index.js";
import { PostgresStore } from "../../src/stores/pg-store.js";
import { crashAgent, haltedAgentName, type AgentTimings } from "../crash/agents.js";
import { Ledger } from "../crash/ledger.js";

export interface PgWorkerOptions extends AgentTimings {
  url: string;
  schema: string;
  ledgerPath: string;
  leaseMs: number;
  concurrency: number;
}

const options = JSON.parse(process.argv[2] ?? "{}") as PgWorkerOptions;
const ledger = new Ledger(options.ledgerPath);
const postgres = await new PostgresStore({ connectionString: options.url, schema: options.schema, poolSize: 4 }).open();

/** The store, telling the parent about each write refused because another worker took the run. */
const store: Store = new Proxy(postgres, {
  get(target, property) {
    const value = Reflect.get(target, property, target) as unknown;
    if (property !== "update" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
    return async (update: Parameters<Store["update"]>[0]) => {
      const result = await target.update(update);
      if (!result.ok && update.expect?.epoch !== undefined && result.run.epoch !== update.expect.epoch) {
        process.send?.({ type: "fenced", runId: update.runId, epoch: update.expect.epoch, current: result.run.epoch });
      }
      return result;
    };
  },
});

const workerId = `worker-pid-${process.pid}`;
const runtime = createTether({
  agents: [crashAgent(ledger, options), crashAgent(ledger, options, haltedAgentName)],
  store,
  leaseMs: options.leaseMs,
  workerPollMs: 20,
  concurrency: options.concurrency,
  workerId,
});

process.on("unhandledRejection", (error) => {
  process.stderr.write(`worker ${process.pid}: unhandled rejection: ${(error as Error)?.stack ?? String(error)}\n`);
});

process.on("message", (message: { type?: string; runIds?: string[] }) => {
  if (message?.type === "executing") {
    process.send?.({ type: "executing", runIds: (message.runIds ?? []).filter((id) => runtime.isExecuting(id)) });
    return;
  }
  if (message?.type !== "stop") return;
  void (async () => {
    await runtime.close();
    await postgres.close();
    ledger.close();
    process.exit(0);
  })();
});

runtime.startWorker();
process.send?.({ type: "ready", pid: process.pid, workerId });
