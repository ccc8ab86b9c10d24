/**
 * A model turn with three 1 s searches: the tool loop with `parallelToolCalls` (the default)
 * against `parallelToolCalls: false`, wall time from start to completed, on a temp SQLite file.
 * `npx tsx bench/parallel-tool-calls.ts`
 */
import { z } from "zod";
import { toolLoopAgent } from "../src/agents/tool-loop-agent.js";
import { tool } from "../src/engine/tool.js";
import { SimulatedModel } from "../src/models/simulated-model.js";
import { harness } from "../src/testing/index.js";

const searches = ["web", "news", "archive"].map((name) =>
  tool({ name, description: `search ${name}`, input: z.object({ id: z.string() }), execute: async ({ id }) => (await new Promise((r) => setTimeout(r, 1_000)), `${name}:${id}`) }),
);
const model = new SimulatedModel({
  tokensPerSecond: Number.POSITIVE_INFINITY,
  script: ({ turn }) => (turn === 0 ? { text: "searching", toolCalls: searches.map((t, i) => ({ toolName: t.name, input: { id: `q${i}` } })) } : { text: "summary" }),
});
const h = harness([
  toolLoopAgent({ name: "parallel", model, tools: searches }),
  toolLoopAgent({ name: "sequential", model, tools: searches, parallelToolCalls: false }),
]);
try {
  for (const name of ["sequential", "parallel"]) {
    const t0 = performance.now();
    const run = await h.runtime.start(name, "tides");
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 30_000 });
    console.log(`${name.padEnd(10)} ${done.status}: a turn with three 1 s searches took ${Math.round(performance.now() - t0)} ms`);
  }
} finally {
  await h.cleanup();
}
