/**
 * A worker process of the scale benchmark: executes loader runs from a PostgreSQL schema.
 * Run as `node --import tsx bench/scale-worker.ts '<json options>'`; says "ready" over IPC,
 * answers {type: "rss"} with its resident memory, stops on {type: "stop"}.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createTether } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { loaderAgent } from "./loader-agent.js";

const options = JSON.parse(process.argv[2] ?? "{}") as { url: string; schema: string; concurrency: number; rounds: number };
const store = await new PostgresStore({ connectionString: options.url, schema: options.schema, poolSize: 8 }).open();
const runtime = createTether({ agents: [loaderAgent(options.rounds)], store, concurrency: options.concurrency, workerPollMs: 50 });
runtime.startWorker();
// SCALE_DEBUG: the worker's event-loop delay, printed when it stops.
const delay = process.env.SCALE_DEBUG ? monitorEventLoopDelay({ resolution: 5 }) : undefined;
delay?.enable();
process.on("message", (message: { type?: string }) => {
  if (message?.type === "rss") {
    globalThis.gc?.();
    process.send?.({ type: "rss", rss: process.memoryUsage().rss, executing: runtime.executingCount });
  }
  if (message?.type === "stop" && delay) console.error(`worker ${process.pid}: loop delay p50 ${(delay.percentile(50) / 1e6).toFixed(1)} ms p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms max ${(delay.max / 1e6).toFixed(1)} ms`);
  if (message?.type === "stop") void runtime.close().then(() => store.close()).then(() => process.exit(0));
});
process.send?.({ type: "ready" });
