/**
 * The durability benchmark (`npm run bench`): what durability costs per step, on disk, on
 * resume and on pause, for an agent whose every step adds about 1 KB. Prints a table and
 * writes `bench-results.json` at the project root.
 *
 * Definitions (kept honest on purpose):
 * - overhead per step: (time of the run on the SQLite runtime − time of the same agent's
 *   next/apply + model-stream loop with no runtime and no store) / steps. The runs follow each
 *   other on one store that is already open (as in a worker or a server); the first run on a
 *   store just opened on a new file is reported too ("cold": it also prepares the statements
 *   and starts the process's checkpoint thread).
 * - bytes per step: growth of the database file over the runs / their steps, with the WAL copied
 *   into the file (a RESTART checkpoint, which keeps the WAL file for reuse) before the first
 *   and after the last; logical bytes: the bytes of the rows a run
 *   inserted (journal entries with their snapshot heads, rows of messages) / steps; new data: the bytes
 *   of the message each step appends (the ~1 KB the targets compare with); handed to the OS: the
 *   bytes the process passed to write calls during the runs (Linux `/proc/self/io` wchar: WAL
 *   frames, whole pages, and the checkpoint thread's copies into the file) / steps.
 * - timings: baseline and durable runs interleaved, after a warm-up; the medians are reported,
 *   the best (minimum) overhead is printed too, with the load average, as the machine is shared.
 * - resume: a fresh SqliteStore on the same file → the run record and the verified, parsed
 *   state, with the agent's next call planned. Floor: a fresh raw connection that SELECTs the
 *   same rows of messages and vars and JSON.parses them, nothing else. Medians of several.
 * - knobs: BENCH_SIZES (default 100,1000,10000), BENCH_PAUSE_SAMPLES (default 300), and
 *   BENCH_DEBUG=1 to print every run's µs per step.
 * - pause: in-process, from calling `pause()` to the moment the stream is cut (the call's
 *   AbortSignal fires; the gate forwards nothing after it, which is checked), many samples;
 *   the time until `call.aborted` is journaled is printed too.
 */
import Database from "better-sqlite3";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createTether,
  SimulatedModel,
  type StepAgentDefinition,
  type Message,
  type TetherModel,
} from "../src/index.js";
import { restoreState } from "../src/engine/snapshot.js";
// The class itself: the benchmark reads its raw connection, which the public type leaves out.
import { SqliteStore } from "../src/stores/sqlite-store.js";
import { seededRandom } from "../src/models/seeded-random.js";
import { baselineLoop, benchAgent, instantModel, median, percentile, runDurable } from "./bench-agent.js";
import { messagesInRows, rowKey } from "../src/stores/sqlite-schema.js";

const projectRoot = fileURLToPath(new URL("../", import.meta.url));
const sizes = (process.env.BENCH_SIZES ?? "100,1000,10000").split(",").map(Number);
const pauseSamples = Number(process.env.BENCH_PAUSE_SAMPLES ?? 300);
const dir = mkdtempSync(join(tmpdir(), "tether-bench-"));

interface Result {
  name: string;
  store: string;
  steps: number | null;
  value: number;
  unit: string;
}
const results: Result[] = [];
const record = (name: string, steps: number | null, value: number, unit: string, store = "sqlite") => results.push({ name, store, steps, value, unit });

/** The file's size once the WAL has been copied into it. */
async function checkpointedSize(store: SqliteStore, path: string): Promise<number> {
  let last: unknown;
  for (let attempt = 0; attempt < 200; attempt++) {
    const [result] = store.database.pragma("wal_checkpoint(RESTART)") as { busy: number; log: number; checkpointed: number }[];
    if (result.busy === 0 && result.log === result.checkpointed) return statSync(path).size;
    last = result;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`the WAL could not be checkpointed: ${JSON.stringify(last)}`);
}

/** Bytes this process has passed to write calls, all threads (Linux); undefined elsewhere. */
function bytesHandedToOs(): number | undefined {
  try {
    const match = /^wchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

function statSafe(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch {
    return undefined;
  }
}

function keyRange(db: Database.Database, runId: string): [number, number] {
  const { rk } = db.prepare("SELECT rk FROM runs WHERE id = ?").get(runId) as { rk: number };
  return [rowKey(rk, 0), rowKey(rk + 1, 0)];
}

/**
 * The bytes of the rows the run inserted: keys and integers counted as 8 bytes, text and blobs
 * at their length; a journal entry's snapshot columns count as snapshot bytes, and a row of
 * messages (key, type, time, bodies) as message bytes.
 */
function logicalBytes(db: Database.Database, runId: string): { total: number; messages: number; journal: number; snapshots: number } {
  const range = keyRange(db, runId);
  const one = (sql: string) => Number((db.prepare(sql).get(...range) as { n: number | null }).n ?? 0);
  const journal = one("SELECT SUM(8 + 8 + 8 + 8 + LENGTH(data)) AS n FROM journal WHERE k >= ? AND k < ? AND type > 0");
  const messages = one("SELECT SUM(8 + 8 + 8 + LENGTH(data)) AS n FROM journal WHERE k >= ? AND k < ? AND type <= 0");
  const snapshots = one(
    "SELECT SUM(8 * 6 + LENGTH(checksum) + COALESCE(LENGTH(vars), 0) + 8 * (snap_at IS NOT NULL)) AS n FROM journal WHERE k >= ? AND k < ? AND snap_seq IS NOT NULL",
  );
  return { total: journal + messages + snapshots, messages, journal, snapshots };
}

/** Open a fresh store → run record → verified state → the next call planned. */
async function resumeOnce(path: string, runId: string, agent: StepAgentDefinition): Promise<number> {
  const began = performance.now();
  const store = new SqliteStore({ path });
  const run = await store.getRun(runId);
  if (!run) throw new Error("run vanished");
  const { state } = restoreState(runId, await store.loadState(runId));
  agent.next(state);
  const ms = performance.now() - began;
  await store.close();
  return ms;
}

/** The live state's bytes alone: a fresh raw connection, SELECT the rows of messages and the vars, JSON.parse them. */
function floorOnce(path: string, runId: string, messageCount: number): number {
  const began = performance.now();
  const db = new Database(path, { readonly: true });
  const [from, to] = keyRange(db, runId);
  const rows = db.prepare("SELECT data FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k").pluck().all(from, to) as string[];
  const messages = messagesInRows(rows).map((body) => JSON.parse(body) as Message);
  const vars = db.prepare("SELECT vars FROM journal WHERE k >= ? AND k < ? AND vars IS NOT NULL ORDER BY k DESC LIMIT 1").get(from, to) as { vars: string };
  JSON.parse(vars.vars);
  const ms = performance.now() - began;
  if (messages.length !== messageCount) throw new Error("floor read the wrong number of messages");
  db.close();
  return ms;
}

async function benchSize(steps: number): Promise<Record<string, number>> {
  const agent = benchAgent(`bench-${steps}`, instantModel, steps);
  const repeats = steps >= 10_000 ? 3 : steps >= 1000 ? 9 : 41;
  const baselines: number[] = [];
  const durables: { ms: number; runId: string; logical: ReturnType<typeof logicalBytes> }[] = [];
  // Cold: the first run on a store just opened on a new file (statements not yet prepared, pages not cached).
  const coldPath = join(dir, `bench-${steps}-cold.db`);
  const coldStore = new SqliteStore({ path: coldPath });
  const coldRuntime = createTether({ agents: [agent], store: coldStore, workerPollMs: 1_000 });
  const cold = await runDurable(coldRuntime, agent.name);
  await coldRuntime.close();
  await coldStore.close();
  // Steady state: the runs follow each other on one store that is already open, as in a worker
  // or a server; a first run of 1,500 steps prepares the statements and writes more than the
  // WAL's bound (32 MiB, about 1,200 steps), so the WAL file has the size it keeps and is reused.
  const path = join(dir, `bench-${steps}.db`);
  const store = new SqliteStore({ path });
  const warm = benchAgent(`bench-${steps}-warm`, instantModel, 1500);
  const runtime = createTether({ agents: [agent, warm], store, workerPollMs: 1_000 });
  await runDurable(runtime, warm.name);
  // Everything in the WAL copied into the file before the runs and after them: the growth is theirs.
  const before = await checkpointedSize(store, path);
  const writtenBefore = bytesHandedToOs();
  // Interleaved, so a burst of load from elsewhere on the machine hits both sides alike.
  for (let i = 0; i < repeats; i++) {
    baselines.push(await baselineLoop(agent, instantModel));
    const { runId, ms } = await runDurable(runtime, agent.name);
    durables.push({ ms, runId, logical: logicalBytes(store.database, runId) });
  }
  const writtenAfter = bytesHandedToOs();
  const growth = (await checkpointedSize(store, path)) - before;
  await runtime.close();
  // The last connection to close checkpoints the WAL into the file and removes it.
  await store.close();
  if (statSafe(`${path}-wal`)) throw new Error("the WAL was not checkpointed at close");
  if (process.env.BENCH_DEBUG) console.error(steps, durables.map((d) => (d.ms / steps * 1000).toFixed(0)).join(" "));
  const baselineMs = median(baselines);
  const byTime = [...durables].sort((a, b) => a.ms - b.ms);
  const durable = { ...byTime[Math.floor(byTime.length / 2)], path };
  const overhead = (durable.ms - baselineMs) / steps;
  const bestOverhead = (byTime[0].ms - Math.min(...baselines)) / steps;
  const coldOverhead = (cold.ms - baselineMs) / steps;

  const state = restoreState(durable.runId, await (async () => {
    const store = new SqliteStore({ path: durable.path });
    const loaded = await store.loadState(durable.runId);
    await store.close();
    return loaded;
  })()).state;
  const newData = state.messages.slice(1).reduce((sum, m) => sum + Buffer.byteLength(JSON.stringify(m)), 0) / steps;

  const samples = steps >= 10_000 ? 15 : 31;
  const resumes: number[] = [];
  const floors: number[] = [];
  const coldResumes: number[] = [];
  // Cold: no other connection has the file open, so opening also creates the WAL and shared-memory files.
  for (let i = 0; i < 3; i++) coldResumes.push(await resumeOnce(durable.path, durable.runId, agent));
  // Warm (the figures reported): another process, the one that paused the run or a server, has it open.
  const holder = new SqliteStore({ path: durable.path });
  await holder.getRun(durable.runId);
  floorOnce(durable.path, durable.runId, state.messages.length);
  await resumeOnce(durable.path, durable.runId, agent);
  // In alternating order, so neither side always runs just after the other's garbage.
  for (let i = 0; i < samples; i++) {
    if (i % 2 === 0) floors.push(floorOnce(durable.path, durable.runId, state.messages.length));
    resumes.push(await resumeOnce(durable.path, durable.runId, agent));
    if (i % 2 === 1) floors.push(floorOnce(durable.path, durable.runId, state.messages.length));
  }
  await holder.close();
  const row = {
    steps,
    baselineMsPerStep: baselineMs / steps,
    durableMsPerStep: durable.ms / steps,
    overhead,
    bestOverhead,
    coldOverhead,
    // Over every run: a single short run's growth is counted in whole pages.
    bytesPerStep: growth / (repeats * steps),
    logicalPerStep: durable.logical.total / steps,
    osBytesPerStep: writtenBefore === undefined || writtenAfter === undefined ? Number.NaN : (writtenAfter - writtenBefore) / (repeats * steps),
    newData,
    resume: median(resumes),
    floor: median(floors),
    coldResume: median(coldResumes),
  };
  record("overhead_ms_per_step", steps, round(overhead, 4), "ms");
  record("cold_overhead_ms_per_step", steps, round(coldOverhead, 4), "ms");
  record("bytes_per_step", steps, Math.round(row.bytesPerStep), "bytes");
  record("logical_bytes_per_step", steps, Math.round(row.logicalPerStep), "bytes");
  if (!Number.isNaN(row.osBytesPerStep)) record("os_write_bytes_per_step", steps, Math.round(row.osBytesPerStep), "bytes");
  record("new_data_bytes_per_step", steps, Math.round(newData), "bytes");
  record("resume_ms", steps, round(row.resume, 3), "ms");
  record("resume_floor_ms", steps, round(row.floor, 3), "ms");
  return row;
}

/**
 * In-process pause latency, from calling `pause()` to the stream being cut: the moment the
 * call's AbortSignal fires, after which the gate forwards no delta (checked: none arrives after
 * it). Also measured: to the `call.aborted` entry being journaled and published.
 */
async function benchPause(): Promise<{ p50: number; p99: number; max: number; samples: number; journaledP50: number; journaledP99: number; lateDeltas: number }> {
  const path = join(dir, "pause.db");
  const store = new SqliteStore({ path });
  const longTurn = "Streaming a long answer token by token so that a pause always lands mid-stream. ".repeat(40);
  const simulated = new SimulatedModel({ tokensPerSecond: 2000, script: () => ({ text: longTurn }) });
  let cutAt = 0;
  const model: TetherModel = {
    specificationVersion: "tether-model-v1",
    provider: simulated.provider,
    modelId: simulated.modelId,
    stream(request, options) {
      options.signal.addEventListener("abort", () => (cutAt = performance.now()), { once: true });
      return simulated.stream(request, options);
    },
  };
  const agent = benchAgent("bench-pause", model, 1_000_000);
  const runtime = createTether({ agents: [agent], store, workerPollMs: 1_000 });
  let lastDelta = 0;
  let deltasSinceResume = 0;
  let journaledAt = 0;
  let lateDeltas = 0;
  const off = runtime.bus.subscribeAll((event) => {
    if (event.kind === "live") {
      lastDelta = performance.now();
      deltasSinceResume += 1;
      if (cutAt !== 0 && lastDelta >= cutAt) lateDeltas += 1;
    } else if (event.entry.type === "call.aborted") journaledAt = performance.now();
  });
  const run = await runtime.start(agent.name, "bench");
  const random = seededRandom(9);
  const latencies: number[] = [];
  const journaled: number[] = [];
  for (let i = 0; i < pauseSamples; i++) {
    while (deltasSinceResume < 3) await new Promise((resolve) => setTimeout(resolve, 1));
    await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 5)));
    cutAt = 0;
    journaledAt = 0;
    const commanded = performance.now();
    await runtime.pause(run.id, { actor: "bench" });
    await runtime.waitFor(run.id, ["paused"]);
    if (cutAt === 0 || journaledAt === 0) throw new Error("the pause did not abort a streaming call");
    latencies.push(cutAt - commanded);
    journaled.push(journaledAt - commanded);
    deltasSinceResume = 0;
    cutAt = 0;
    await runtime.resume(run.id, { actor: "bench" });
  }
  off();
  await runtime.cancel(run.id);
  await runtime.waitFor(run.id, ["cancelled"]);
  await runtime.close();
  await store.close();
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  record("pause_p50_ms", null, round(p50, 3), "ms");
  record("pause_p99_ms", null, round(p99, 3), "ms");
  return { p50, p99, max: Math.max(...latencies), samples: latencies.length, journaledP50: percentile(journaled, 50), journaledP99: percentile(journaled, 99), lateDeltas };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

try {
  // Warm-up (JIT, SQLite page cache, the checkpointer thread's code): nothing here is recorded.
  {
    const agent = benchAgent("bench-warmup", instantModel, 3000);
    await baselineLoop(agent, instantModel);
    const store = new SqliteStore({ path: join(dir, "warmup.db") });
    const runtime = createTether({ agents: [agent], store, workerPollMs: 1_000 });
    await runDurable(runtime, agent.name);
    await runtime.close();
    await store.close();
  }
  const rows: Record<string, number>[] = [];
  for (const steps of sizes) {
    rows.push(await benchSize(steps));
    process.stderr.write(`  ${steps} steps done\n`);
  }
  const pause = await benchPause();
  const fmt = (v: number, d = 3) => v.toFixed(d).padStart(9);
  console.log("\nDurability benchmark (SQLite store, ~1 KB per step, instant model)\n");
  console.log(`load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} on ${availableParallelism()} CPUs; medians unless marked`);
  console.log("   steps | base ms/st | dur ms/st | overhead ms/st | (best) | (cold) | file B/st | logical B/st | new B/st | to OS B/st | resume ms | floor ms | resume/floor | cold resume ms");
  console.log("---------+-----------+-----------+----------------+--------+--------+-----------+--------------+----------+------------+-----------+----------+--------------+---------------");
  for (const r of rows) {
    console.log(
      `${String(r.steps).padStart(8)} |${fmt(r.baselineMsPerStep, 4)}  |${fmt(r.durableMsPerStep, 4)}  |${fmt(r.overhead, 4)}       |${fmt(r.bestOverhead, 4).slice(2)} |${fmt(r.coldOverhead, 4).slice(2)} |${fmt(r.bytesPerStep, 0)}  |${fmt(r.logicalPerStep, 0)}     |${fmt(r.newData, 0)} |${Number.isNaN(r.osBytesPerStep) ? "      n/a" : fmt(r.osBytesPerStep, 0)}   |${fmt(r.resume)}  |${fmt(r.floor)} |${fmt(r.resume / r.floor, 2)}     |${fmt(r.coldResume)}`,
    );
  }
  console.log(
    `\npause (in-process, ${pause.samples} samples): command → stream cut p50 ${pause.p50.toFixed(3)} ms, p99 ${pause.p99.toFixed(3)} ms, max ${pause.max.toFixed(3)} ms; ` +
      `deltas after the cut: ${pause.lateDeltas}; command → call.aborted journaled p50 ${pause.journaledP50.toFixed(3)} ms, p99 ${pause.journaledP99.toFixed(3)} ms`,
  );
  console.log("\ntargets: overhead ≤ 0.1 ms/step and flat; bytes/step ≤ 1.5 × new data; resume ≤ 10 ms at 1,000 steps and ≤ 1.5 × floor; pause p99 ≤ 5 ms");
  writeFileSync(join(projectRoot, "bench-results.json"), `${JSON.stringify(results, null, 2)}\n`);
  console.log(`wrote ${join(projectRoot, "bench-results.json")}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
