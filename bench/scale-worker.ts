/**
 * A worker process of the scale benchmark: executes loader runs from a PostgreSQL schema.
 * Run as `node --import tsx bench/scale-worker.ts '<json options>'`; says "ready" over IPC,
 * answers {type: "rss"} with its resident memory, stops on {type: "stop"}.
 */
import { createTether } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { loaderAgent } from "./loader-agent.js";
import { loopLag } from "./loop-lag.js";

const options = JSON.parse(process.argv[2] ?? "{}") as { url: string; schema: string; concurrency: number; rounds: number };
const store = await new PostgresStore({ connectionString: options.url, schema: options.schema, poolSize: 8 }).open();
const runtime = createTether({ agents: [loaderAgent(options.rounds)], store, concurrency: options.concurrency, workerPollMs: 50 });
runtime.startWorker();
// SCALE_DEBUG: the worker's event-loop lag, printed when it stops.
const lag = process.env.SCALE_DEBUG ? loopLag(5) : undefined;
lag?.enable();
process.on("message", (message: { type?: string }) => {
  if (message?.type === "rss") {
    globalThis.gc?.();
    process.send?.({ type: "rss", rss: process.memoryUsage().rss, executing: runtime.executingCount });
  }
  if (message?.type === "stop" && lag) console.error(`worker ${process.pid}: loop lag p50 ${lag.lagMs(50).toFixed(1)} ms p99 ${lag.lagMs(99).toFixed(1)} ms max ${lag.lagMs(100).toFixed(1)} ms`);
  if (message?.type === "stop") void runtime.close().then(() => store.close()).then(() => process.exit(0));
});
process.send?.({ type: "ready" });
