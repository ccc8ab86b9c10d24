/**
 * The async-function agent benchmark (`npm run bench:function`, part of `npm run bench`).
 *
 * - overhead per gate: (time of an async-function agent of N `ctx.step` gates, each returning
 *   about 1 KB, on the SQLite runtime − time of the same loop calling the same functions with no
 *   runtime and no store) / N. Runs follow each other on one open store; medians, interleaved.
 * - resume at N steps: a run paused after N journaled gates (its gate N+1 was aborted); from a
 *   worker runtime on the file (its statements prepared by another run's pause and resume,
 *   nothing of this run cached), `resume()` → the command
 *   written → claimed → snapshot read and verified → the function called from the top, all N
 *   gates replayed from the journal → gate N+1's `call.started` journaled. Floor: a fresh raw connection that SELECTs the run's message rows
 *   (the journaled results) and JSON.parses them, nothing else (as the durability benchmark's floor).
 * - knobs: FUNCTION_BENCH_SIZES (default 100,1000,10000).
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createTether, durableAgent, type FunctionAgentDefinition, type Runtime } from "../src/index.js";
import { seededRandom } from "../src/models/seeded-random.js";
import { messagesInRows, rowKey } from "../src/stores/sqlite-schema.js";
import { SqliteStore } from "../src/stores/sqlite-store.js";
import { median } from "./bench-agent.js";

const projectRoot = fileURLToPath(new URL("../", import.meta.url));
const sizes = (process.env.FUNCTION_BENCH_SIZES ?? "100,1000,10000").split(",").map(Number);
const dir = mkdtempSync(join(tmpdir(), "tether-fn-bench-"));

/** ~1 KB of text per gate, precomputed. */
const payloads = (() => {
  const random = seededRandom(2);
  const words = ["agent", "budget", "cache", "durable", "effect", "journal", "lease", "model", "pause", "resume", "snapshot", "step", "tool", "worker"];
  return Array.from({ length: 64 }, () => {
    let text = "";
    while (text.length < 1000) text += `${words[Math.floor(random() * words.length)]} `;
    return text.slice(0, 1000);
  });
})();

/** What each gate does: a cheap function returning ~1 KB. */
const work = (i: number) => ({ i, text: payloads[i % payloads.length] });

/** The same loop with no runtime: call each function, keep its result. */
async function baseline(steps: number): Promise<number> {
  const began = performance.now();
  const results: unknown[] = [];
  for (let i = 0; i < steps; i++) results.push(await Promise.resolve().then(() => work(i)));
  if (results.length !== steps) throw new Error("baseline lost results");
  return performance.now() - began;
}

function stepsAgent(name: string, steps: number, hold = false): FunctionAgentDefinition {
  return durableAgent({
    name,
    budgets: { maxSteps: steps + 10 },
    run: async (ctx) => {
      let chars = 0;
      for (let i = 0; i < steps; i++) chars += (await ctx.step("work", () => work(i))).text.length;
      // The gate after the journaled ones: it waits (abortable) so the run can be paused here again.
      if (hold) await ctx.step("hold", async ({ signal }) => new Promise<null>((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true })), { abortable: true });
      return chars;
    },
  });
}

async function until(runtime: Runtime, runId: string, predicate: (type: string, callSeq: number | null, to: unknown) => boolean, start: () => Promise<unknown>): Promise<number> {
  let resolveAt!: (at: number) => void;
  const reached = new Promise<number>((resolve) => (resolveAt = resolve));
  const off = runtime.bus.subscribeAll((event) => {
    if (event.kind === "journal" && event.runId === runId && predicate(event.entry.type, event.entry.callSeq ?? null, event.entry.data.to)) resolveAt(performance.now());
  });
  await start();
  const at = await reached;
  off();
  return at;
}

async function runToEnd(runtime: Runtime, name: string): Promise<{ ms: number; runId: string }> {
  const began = performance.now();
  let runId = "";
  const ended = await untilStatus(runtime, () => runtime.start(name, null).then((r) => (runId = r.id)));
  const run = await runtime.get(runId);
  if (run.status !== "completed") throw new Error(`bench run ended ${run.status}: ${run.statusReason}`);
  return { ms: ended - began, runId };
}

async function untilStatus(runtime: Runtime, start: () => Promise<unknown>): Promise<number> {
  let resolveAt!: (at: number) => void;
  const reached = new Promise<number>((resolve) => (resolveAt = resolve));
  const off = runtime.bus.subscribeAll((event) => {
    if (event.kind === "journal" && event.entry.type === "status" && ["completed", "failed", "paused"].includes(String(event.entry.data.to))) resolveAt(performance.now());
  });
  await start();
  const at = await reached;
  off();
  return at;
}

function floorOnce(path: string, runId: string, expected: number): number {
  const began = performance.now();
  const db = new Database(path, { readonly: true });
  const { rk } = db.prepare("SELECT rk FROM runs WHERE id = ?").get(runId) as { rk: number };
  const rows = db.prepare("SELECT data FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k").pluck().all(rowKey(rk, 0), rowKey(rk + 1, 0)) as string[];
  const messages = messagesInRows(rows).map((body) => JSON.parse(body) as unknown);
  const ms = performance.now() - began;
  db.close();
  if (messages.length !== expected) throw new Error(`floor read ${messages.length} messages, expected ${expected}`);
  return ms;
}

async function overhead(steps: number): Promise<{ baseline: number; durable: number; perGate: number }> {
  const store = new SqliteStore({ path: join(dir, `overhead-${steps}.db`) });
  const agent = stepsAgent(`steps-${steps}`, steps);
  const runtime = createTether({ agents: [agent], store, workerPollMs: 1_000 });
  await runToEnd(runtime, agent.name);
  const repeats = steps >= 10_000 ? 3 : steps >= 1000 ? 9 : 31;
  const baselines: number[] = [];
  const durables: number[] = [];
  for (let i = 0; i < repeats; i++) {
    baselines.push(await baseline(steps));
    durables.push((await runToEnd(runtime, agent.name)).ms);
  }
  await runtime.close();
  await store.close();
  const b = median(baselines);
  const d = median(durables);
  return { baseline: b / steps, durable: d / steps, perGate: (d - b) / steps };
}

async function resume(steps: number): Promise<{ resume: number; floor: number }> {
  const path = join(dir, `resume-${steps}.db`);
  const agent = stepsAgent(`resume-${steps}`, steps, true);
  const warm = stepsAgent(`warm-${steps}`, 1, true);
  // The run: N gates journaled, then paused in the hold gate.
  let store = new SqliteStore({ path });
  let runtime = createTether({ agents: [agent], store, workerPollMs: 1_000 });
  const runId = (await runtime.start(agent.name, null)).id;
  await runtime.waitFor(runId, (r) => r.step === steps && (r.inflightCalls?.length ?? 0) === 1, { timeoutMs: 600_000 });
  await runtime.pause(runId);
  await runtime.waitFor(runId, ["paused"]);
  await runtime.close();
  await store.close();

  // Another process keeps the file open, as the one that paused it or a server would.
  const holder = new SqliteStore({ path });
  await holder.getRun(runId);
  const samples = steps >= 10_000 ? 9 : 21;
  const resumes: number[] = [];
  const floors: number[] = [];
  floorOnce(path, runId, steps);
  for (let i = 0; i < samples + 1; i++) {
    if (i % 2 === 0) floors.push(floorOnce(path, runId, steps));
    // A worker that is already running (its store open and its statements prepared by another
    // run's pause and resume, nothing of this run cached) gets the resume.
    store = new SqliteStore({ path });
    runtime = createTether({ agents: [agent, warm], store, workerPollMs: 1_000 });
    const other = (await runtime.start(warm.name, null)).id;
    for (let round = 0; round < 2; round++) {
      await runtime.waitFor(other, (r) => (r.inflightCalls?.length ?? 0) === 1 && r.status === "running");
      await runtime.pause(other);
      await runtime.waitFor(other, ["paused"]);
      if (round === 0) await runtime.resume(other);
    }
    const began = performance.now();
    const at = await until(
      runtime,
      runId,
      (type, callSeq) => type === "call.started" && callSeq === steps + 1,
      () => runtime.resume(runId),
    );
    // The first sample warms the code paths; it is not counted.
    if (i > 0) resumes.push(at - began);
    await runtime.pause(runId);
    await runtime.waitFor(runId, ["paused"]);
    await runtime.close();
    await store.close();
    if (i % 2 === 1) floors.push(floorOnce(path, runId, steps));
  }
  await holder.close();
  return { resume: median(resumes), floor: median(floors) };
}

const round = (v: number, d: number) => Math.round(v * 10 ** d) / 10 ** d;

try {
  await overhead(2000); // warm-up
  const rows: { steps: number; baseline: number; durable: number; perGate: number; resume: number; floor: number }[] = [];
  for (const steps of sizes) {
    const o = await overhead(steps);
    const r = await resume(steps);
    rows.push({ steps, ...o, ...r });
    process.stderr.write(`  ${steps} gates done\n`);
  }
  console.log("\nAsync-function agent benchmark (SQLite store, ctx.step gates of ~1 KB)\n");
  console.log(`load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} on ${availableParallelism()} CPUs; medians`);
  console.log("   gates | no store ms/gate | durable ms/gate | overhead ms/gate | resume ms | floor ms | resume/floor");
  console.log("---------+------------------+-----------------+------------------+-----------+----------+-------------");
  for (const r of rows) {
    console.log(
      `${String(r.steps).padStart(8)} | ${r.baseline.toFixed(4).padStart(16)} | ${r.durable.toFixed(4).padStart(15)} | ${r.perGate.toFixed(4).padStart(16)} | ${r.resume.toFixed(3).padStart(9)} | ${r.floor.toFixed(3).padStart(8)} | ${(r.resume / r.floor).toFixed(2).padStart(12)}`,
    );
  }
  console.log("\ntarget: resume ≤ 2 × floor (replay costs what reading costs). For scale (issue 13): Restate 1.7 ~1.2 ms per ctx.run step, 48/165/450 ms to replay 100/1,000/10,000 steps.");
  const file = join(projectRoot, "bench-results-function.json");
  const results = rows.flatMap((r) => [
    { name: "function_overhead_ms_per_gate", steps: r.steps, value: round(r.perGate, 4), unit: "ms" },
    { name: "function_resume_ms", steps: r.steps, value: round(r.resume, 3), unit: "ms" },
    { name: "function_resume_floor_ms", steps: r.steps, value: round(r.floor, 3), unit: "ms" },
  ]);
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`wrote ${file}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
