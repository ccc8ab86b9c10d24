/**
 * One process of the takeover suite, on SQLite (`createTether({ agents, dir })`, as a new user
 * would) or PostgreSQL. `start`: starts a run whose first tool call never returns, and says so
 * over IPC (the test SIGKILLs it there). `recover`: a fresh runtime on the same store that calls
 * neither `startWorker()` nor `resume`; `worker`: the same plus `startWorker()`, as `tether worker`
 * does. The test watches the store and the tools' ledger.
 */
import { createTether } from "../../src/index.js";
import { PostgresStore } from "../../src/stores/pg-store.js";
import { takeoverAgents } from "./agents.js";

const options = JSON.parse(process.argv[2] ?? "{}") as {
  mode: "start" | "recover" | "worker";
  dir: string;
  pg?: { url: string; schema: string };
  ledgerPath: string;
  leaseMs: number;
  agent?: string;
};
const send = (message: Record<string, unknown>) => process.send?.(message);
const agents = takeoverAgents(options.ledgerPath, { block: options.mode === "start" });
const store = options.pg ? await new PostgresStore({ connectionString: options.pg.url, schema: options.pg.schema, poolSize: 2 }).open() : undefined;
// `worker` leaves the recovery to startWorker alone, as the CLI does.
const tether = createTether({ agents, ...(store ? { store } : { dir: options.dir }), leaseMs: options.leaseMs, secrets: false, tracing: false, recoverOrphans: options.mode !== "worker" });
if (options.mode === "worker") tether.startWorker();

process.on("message", (message: { type?: string }) => {
  if (message?.type !== "stop") return;
  void (async () => {
    await tether.close();
    await store?.close();
    process.exit(0);
  })();
});

if (options.mode === "start") await tether.start(options.agent!, null);
send({ type: "ready" });
