/**
 * The scale benchmark (`npm run bench:scale`; `npm run bench` runs it after the durability
 * benchmark): what Tether costs on PostgreSQL and how far one worker and several go. Prints a
 * table and writes `bench-results-scale.json`. Needs the PostgreSQL at TETHER_TEST_DATABASE_URL
 * (default postgres://postgres@127.0.0.1:5432/test); each part works in a schema of its own,
 * dropped afterwards.
 *
 * 1. PostgreSQL durable overhead per step, for runs of 100, 1,000 and 10,000 steps of ~1 KB:
 *    (time of the run on a PostgreSQL runtime − the same agent's loop with no runtime) / steps,
 *    against a floor measured in the same run: one INSERT of the step's bytes and its commit on
 *    one connection (autocommit), per step. Medians of interleaved repeats, each side measured
 *    after `warmupSteps` steps of its own; a sample of either side holds at least 2,000 steps
 *    (twenty 100-step runs one after another, two of 1,000).
 * 2. Concurrency on one worker, SQLite and PostgreSQL (SCALE_STORES, default both): SCALE_RUNS
 *    (default 1000) tool-loop runs at once (simulated model at 100 tokens/s, a 50 ms abortable
 *    tool, 6 rounds: 13 steps each), started together; meanwhile every 100 ms one running run is
 *    paused in-process and resumed once paused. Steps per second, event-loop lag p50/p99 (how late a
 *    timer fires: bench/loop-lag.ts), pause latency p50/p99, CPU ms per step (user + system of the
 *    process over all the steps, its threads included: the collector's helpers, SQLite's
 *    checkpointer), and how busy the event
 *    loop was (`performance.eventLoopUtilization`: its share of the time, and its active ms per
 *    step; a loop near 100% busy delays every timer, whatever the step costs). Two
 *    batches, one after the other in the same process: `cold`, the first, runs much of the step
 *    code before the JIT has optimised it (a new user's first try); `warm`, the second, is a
 *    worker that has run a while, as the cluster's workers are measured (part 3).
 *    Steps per second is the worker's throughput: the steps of the runs the pause loop left
 *    alone over the time from the start until the last of them ended (their journals' last
 *    write). A paused run's model call is aborted and issued again on resume, so the paused runs
 *    end up to a turn later than the rest (~0.5 s at 100 tokens/s), a tail where the worker only
 *    waits on the model; the rate over all the runs until the last of them is printed beside it.
 * 3. 1, 2 and 4 worker processes on one PostgreSQL schema: SCALE_CLUSTER_RUNS (default 400) runs
 *    started at once by a process that executes none; runs per second until all complete, and the
 *    latency of pauses written by that process p50/p99. Measured after SCALE_CLUSTER_WARMUP
 *    (default 400) runs the workers executed unmeasured: a freshly spawned worker runs its first
 *    hundred runs' steps largely unoptimised by the JIT, which is not the cost of a worker that
 *    has run a while (0 measures the cold start).
 *
 * A pause's latency runs from its command's commit (the `pause` call resolved; the call's own
 * time is reported apart) to `paused` as read by a connection of the bench's own, outside the
 * runtime under test; the end of the runs is watched the same way, so the measurement neither
 * queues behind the worker's writes nor adds reads to its pool. A pause lets a tool call already
 * started finish (the loader's takes 50 ms), so a pause that lands in one waits for it.
 * SCALE_DEBUG=1 prints every latency and, for a pause over 80 ms, the run's last journal entries.
 * 4. Worker memory with SCALE_PAUSED (default 10,000) paused runs in its database, against the
 *    same worker on an empty one.
 */
import { randomBytes } from "node:crypto";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import pg from "pg";
import { createTether, SqliteStore, type Runtime, type Store } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { testDatabaseUrl } from "../src/testing/temp-postgres.js";
import { baselineLoop, benchAgent, instantModel, median, percentile, runDurable } from "./bench-agent.js";
import { loopLag } from "./loop-lag.js";
import { loaderAgent } from "./loader-agent.js";

const projectRoot = fileURLToPath(new URL("../", import.meta.url));
const url = testDatabaseUrl;
const sizes = (process.env.SCALE_SIZES ?? "100,1000,10000").split(",").map(Number);
const concurrentRuns = Number(process.env.SCALE_RUNS ?? 1000);
const clusterRuns = Number(process.env.SCALE_CLUSTER_RUNS ?? 400);
const clusterWarmupRuns = Number(process.env.SCALE_CLUSTER_WARMUP ?? 400);
const pausedRuns = Number(process.env.SCALE_PAUSED ?? 10_000);
const workerCounts = (process.env.SCALE_WORKERS ?? "1,2,4").split(",").map(Number);
const rounds = 6;
const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function schemaName(part: string): string {
  return `bench_${part}_${randomBytes(3).toString("hex")}`;
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}

// 1. Overhead per step against the floor.

/**
 * The floor: one INSERT of ~1 KB and its commit, per step, on one connection kept open (as the
 * runtime's pool keeps its own), the statement prepared once: µs per step over `floorSteps`.
 */
const floorSteps = 2000;

async function openFloor(): Promise<{ perStep(): Promise<number>; close(): Promise<void> }> {
  const schema = schemaName("floor");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`CREATE SCHEMA "${schema}"`);
  await client.query(`CREATE TABLE "${schema}".steps (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))`);
  const body = "x".repeat(1000);
  let seq = 0;
  const insert = () => client.query({ name: "floor", text: `INSERT INTO "${schema}".steps (run_id, seq, body) VALUES ($1, $2, $3)`, values: ["run", seq++, body] });
  return {
    async perStep() {
      const began = performance.now();
      for (let i = 0; i < floorSteps; i++) await insert();
      return ((performance.now() - began) / floorSteps) * 1000;
    },
    async close() {
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    },
  };
}

/**
 * Steps run before any is measured, in every part, on each side: a worker runs for hours, and
 * the process and PostgreSQL's backends take a few thousand steps to reach their pace (one
 * 100-step run as the warm-up left part of that in the 100-step figure).
 */
const warmupSteps = 5000;

async function overhead(): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  const floor = await openFloor();
  try {
    for (let warmed = 0; warmed < warmupSteps; warmed += floorSteps) await floor.perStep();
    for (const steps of sizes) {
      const schema = schemaName("overhead");
      const store = await new PostgresStore({ connectionString: url, schema }).open();
      const agent = benchAgent(`bench-${steps}`, instantModel, steps);
      const runtime = createTether({ agents: [agent], store, secrets: false });
      try {
        // Warm up the pool's connections, the statements and the JIT.
        for (let warmed = 0; warmed < warmupSteps; warmed += steps) {
          await runDurable(runtime, agent.name);
          await baselineLoop(agent, instantModel);
        }
        const repeats = steps >= 10_000 ? 3 : steps >= 1000 ? 5 : 15;
        // A sample holds as many steps as a floor's (runs one after another, as a worker runs
        // them): a lone 100-step run right after the floor's 2,000 inserts ran ~25% slower than the
        // next one, the connections and caches cold, which the floor's own sample amortises.
        const runsPerSample = Math.max(1, Math.ceil(floorSteps / steps));
        const over: number[] = [];
        const floors: number[] = [];
        for (let i = 0; i < repeats; i++) {
          let base = 0;
          let durable = 0;
          for (let r = 0; r < runsPerSample; r++) base += await baselineLoop(agent, instantModel);
          for (let r = 0; r < runsPerSample; r++) durable += (await runDurable(runtime, agent.name)).ms;
          over.push(((durable - base) / (steps * runsPerSample)) * 1000);
          floors.push(await floor.perStep());
        }
        const row = { steps, overheadUsPerStep: median(over), floorUsPerStep: median(floors), ratio: median(over) / median(floors) };
        rows.push(row);
        console.log(`  ${String(steps).padStart(6)} steps   overhead ${fmt(row.overheadUsPerStep)} µs/step   floor ${fmt(row.floorUsPerStep)} µs/step   ratio ${fmt(row.ratio, 2)}×`);
      } finally {
        await runtime.close();
        await store.close();
        await dropSchema(schema);
      }
    }
  } finally {
    await floor.close();
  }
  return rows;
}

// 2. Concurrency on one worker.

async function concurrency(kind: "sqlite" | "postgres"): Promise<Record<string, unknown>[]> {
  const dir = mkdtempSync(join(tmpdir(), "tether-scale-"));
  const schema = schemaName("concurrency");
  const store: Store = kind === "sqlite" ? new SqliteStore({ path: join(dir, "tether.db") }) : await new PostgresStore({ connectionString: url, schema, poolSize: 10 }).open();
  const tether = createTether({ agents: [loaderAgent(rounds)], store, concurrency: concurrentRuns, secrets: false });
  tether.startWorker();
  const reader = kind === "sqlite" ? sqliteReader(join(dir, "tether.db")) : await pgReader(schema);
  try {
    const rows = [];
    for (const round of ["cold", "warm"] as const) rows.push(await concurrencyRound(kind, round, tether, reader));
    return rows;
  } finally {
    await reader.close();
    await tether.close();
    await store.close();
    if (kind === "postgres") await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * One batch of `concurrentRuns` runs on the worker, measured until they all end: the first
 * (`cold`) in a process that has not run the engine's step code yet, as a new user's first try;
 * the second (`warm`) once the JIT has optimised it, as a worker that has run a while.
 */
async function concurrencyRound(kind: "sqlite" | "postgres", round: "cold" | "warm", tether: Runtime, reader: StatusReader): Promise<Record<string, unknown>> {
  const stepsBefore = await reader.steps();
  const completedBefore = (await reader.counts()).get("completed") ?? 0;
  const loop = loopLag(5);
  const cpuBefore = process.cpuUsage();
  const utilizationBefore = performance.eventLoopUtilization();
  const began = performance.now();
  // The runs' journals are stamped with the wall clock.
  const startedAt = Date.now();
  loop.enable();
  const ids: string[] = [];
  for (let i = 0; i < concurrentRuns; i += 100) {
    const batch = await Promise.all(Array.from({ length: Math.min(100, concurrentRuns - i) }, (_, j) => tether.start("loader", `topic ${i + j}`)));
    ids.push(...batch.map((r) => r.id));
  }
  const pauses = pauseWhileRunning(tether, ids, reader);
  await allEnded(reader);
  const elapsedS = (performance.now() - began) / 1000;
  loop.disable();
  const cpu = process.cpuUsage(cpuBefore);
  const utilization = performance.eventLoopUtilization(utilizationBefore);
  const { latencies, calls, paused } = await pauses.stop();
  const completed = ((await reader.counts()).get("completed") ?? 0) - completedBefore;
  const steps = (await reader.steps()) - stepsBefore;
  const measured = new Set(ids);
  const left = (await reader.ends()).filter((run) => measured.has(run.id) && !paused.has(run.id));
  const leftSteps = left.reduce((sum, run) => sum + run.steps, 0);
  // None left alone (a handful of runs, all paused): no rate of its own.
  const leftS = left.length > 0 ? (Math.max(...left.map((run) => run.endedAt)) - startedAt) / 1000 : Number.NaN;
  const row = {
    store: kind,
    round,
    runs: concurrentRuns,
    completed,
    steps,
    stepsPerSecond: leftSteps / leftS,
    runsLeftAlone: left.length,
    stepsPerSecondAllRuns: steps / elapsedS,
    eventLoopLagP50Ms: loop.lagMs(50),
    eventLoopLagP99Ms: loop.lagMs(99),
    eventLoopIntervalP99Ms: loop.intervalMs(99),
    pauseP50Ms: percentile(latencies, 50),
    pauseP99Ms: percentile(latencies, 99),
    pauseCallP99Ms: percentile(calls, 99),
    pauses: latencies.length,
    cpuMsPerStep: (cpu.user + cpu.system) / 1000 / steps,
    loopUtilization: utilization.utilization,
    loopActiveMsPerStep: utilization.active / steps,
  };
  console.log(
    `  ${kind.padEnd(8)} ${round} ${row.completed}/${row.runs} runs, ${steps} steps: ${fmt(row.stepsPerSecond)} steps/s (${left.length} runs not paused; all runs until the last: ${fmt(row.stepsPerSecondAllRuns)})   loop lag p50 ${fmt(row.eventLoopLagP50Ms)} ms p99 ${fmt(row.eventLoopLagP99Ms)} ms (5 ms samples ${fmt(row.eventLoopIntervalP99Ms)} ms apart at p99)   pause p50 ${fmt(row.pauseP50Ms)} ms p99 ${fmt(row.pauseP99Ms)} ms (${latencies.length}; the call p99 ${fmt(row.pauseCallP99Ms)} ms)   CPU ${fmt(row.cpuMsPerStep, 3)} ms/step (the loop ${fmt(row.loopUtilization * 100)}% busy, ${fmt(row.loopActiveMsPerStep, 3)} ms/step)`,
  );
  return row;
}

/**
 * Reads run statuses on a connection of its own, outside the runtime under test: a measurement
 * never queues behind the worker's writes (nor adds reads to its pool).
 */
interface StatusReader {
  status(id: string): Promise<string | undefined>;
  /** How many runs have each status. */
  counts(): Promise<Map<string, number>>;
  /** The sum of the runs' steps. */
  steps(): Promise<number>;
  /** Each run's steps and the wall-clock time (ms) of its last write. */
  ends(): Promise<{ id: string; steps: number; endedAt: number }[]>;
  close(): Promise<void>;
}

async function pgReader(schema: string): Promise<StatusReader> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const s = `"${schema}"`;
  return {
    async status(id) {
      return (await client.query<{ status: string }>({ name: "status", text: `SELECT status FROM ${s}.runs WHERE id = $1`, values: [id] })).rows[0]?.status;
    },
    async counts() {
      const { rows } = await client.query<{ status: string; n: string }>(`SELECT status, count(*) AS n FROM ${s}.runs GROUP BY status`);
      return new Map(rows.map((r) => [r.status, Number(r.n)]));
    },
    async steps() {
      return Number((await client.query<{ n: string }>(`SELECT sum((doc::json ->> 'step')::int) AS n FROM ${s}.runs`)).rows[0].n);
    },
    async ends() {
      const { rows } = await client.query<{ id: string; steps: number; ended_at: string }>(`SELECT id, (doc::json ->> 'step')::int AS steps, updated_at AS ended_at FROM ${s}.runs`);
      return rows.map((r) => ({ id: r.id, steps: r.steps, endedAt: Number(r.ended_at) }));
    },
    close: () => client.end(),
  };
}

function sqliteReader(path: string): StatusReader {
  const db = new Database(path, { readonly: true });
  const status = db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
  const counts = db.prepare("SELECT status, count(*) AS n FROM runs GROUP BY status");
  const steps = db.prepare("SELECT sum(json_extract(doc, '$.step')) FROM runs").pluck();
  const ends = db.prepare("SELECT id, json_extract(doc, '$.step') AS steps, json_extract(doc, '$.updatedAt') AS endedAt FROM runs");
  return {
    status: async (id) => status.get(id) as string | undefined,
    counts: async () => new Map((counts.all() as { status: string; n: number }[]).map((r) => [r.status, r.n])),
    steps: async () => Number(steps.get()),
    ends: async () => ends.all() as { id: string; steps: number; endedAt: number }[],
    close: async () => void db.close(),
  };
}

/** Resolves once no run is queued, running, pausing or paused (checked every 50 ms). */
async function allEnded(reader: StatusReader): Promise<void> {
  for (;;) {
    const counts = await reader.counts();
    if (!["queued", "running", "pausing", "paused"].some((status) => (counts.get(status) ?? 0) > 0)) return;
    await sleep(50);
  }
}

/**
 * Every 100 ms, pauses one running run (each at most once), waits for `paused`, resumes it. The
 * latency is from the pause's commit (the call resolved) to `paused` as the independent reader
 * sees it; the pause call's own time is kept apart.
 */
function pauseWhileRunning(tether: Runtime, ids: string[], reader: StatusReader): { stop(): Promise<{ latencies: number[]; calls: number[]; paused: ReadonlySet<string> }> } {
  const latencies: number[] = [];
  const calls: number[] = [];
  let stopped = false;
  const paused = new Set<string>();
  const loop = (async () => {
    while (!stopped) {
      await sleep(100);
      // A run picked at random until one is running (a person picks one from the list).
      let id: string | undefined;
      for (let tries = 0; tries < 20 && id === undefined; tries++) {
        const candidate = ids[Math.floor(Math.random() * ids.length)];
        if (!paused.has(candidate) && (await reader.status(candidate)) === "running") id = candidate;
      }
      if (id === undefined) continue;
      paused.add(id);
      try {
        const sent = performance.now();
        const recorded = await tether.pause(id, { reason: "bench" });
        const committed = performance.now();
        if (recorded.status !== "pausing") throw new Error(`went ${recorded.status}`);
        let polls = 0;
        let widest = 0;
        let last = committed;
        for (;;) {
          const status = await reader.status(id);
          const now = performance.now();
          polls += 1;
          widest = Math.max(widest, now - last);
          last = now;
          if (status === "paused") break;
          if (status !== "pausing") throw new Error(`went ${status}`);
          await sleep(1);
        }
        const latency = performance.now() - committed;
        if (process.env.SCALE_DEBUG && latency > 80) console.error(`  read ${polls} times, the widest gap between reads ${widest.toFixed(0)} ms`);
        latencies.push(latency);
        calls.push(committed - sent);
        if (process.env.SCALE_DEBUG && latency > 80) await traceSlowPause(tether, id, latency);
      } catch (error) {
        // The run ended first, or no worker held it (paused at once): not a pause to measure.
        if (process.env.SCALE_DEBUG) console.error(String(error));
      }
      await tether.resume(id).catch(() => undefined);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      if (process.env.SCALE_DEBUG) console.error(`pause latencies (ms, in order): ${latencies.map((l) => l.toFixed(0)).join(" ")}`);
      return { latencies, calls, paused };
    },
  };
}

/**
 * SCALE_DEBUG: the last journal entries of a run whose pause took long, each stamped in ms from
 * the pause's commit (a call's `call.started` is stamped when it is made, before it commits).
 */
async function traceSlowPause(tether: Runtime, id: string, latency: number): Promise<void> {
  const committedAt = Date.now() - latency;
  const journal = await tether.journal(id, { limit: 1000 });
  const entries = journal.slice(-8).map((e) => `${e.type}${e.data?.name ? `(${String(e.data.name)})` : ""}@${(e.at - committedAt).toFixed(0)}${e.type === "recovery" ? JSON.stringify(e.data) : ""}`);
  console.error(`slow pause of ${id}, ${latency.toFixed(0)} ms: ${entries.join(" ")}`);
}

// 3. Several worker processes.

interface Worker {
  child: ChildProcess;
  request<T>(type: string): Promise<T>;
  stop(): Promise<void>;
}

async function spawnWorker(schema: string, concurrencyLimit: number): Promise<Worker> {
  const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", join(projectRoot, "bench/scale-worker.ts"), JSON.stringify({ url, schema, concurrency: concurrencyLimit, rounds })], {
    cwd: projectRoot,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`worker exited with ${code}`)));
  });
  return {
    child,
    request<T>(type: string) {
      return new Promise<T>((resolve) => {
        const listener = (message: { type?: string }) => {
          if (message.type !== type) return;
          child.off("message", listener);
          resolve(message as T);
        };
        child.on("message", listener);
        child.send({ type });
      });
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.send({ type: "stop" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function cluster(workers: number): Promise<Record<string, unknown>> {
  const schema = schemaName(`cluster${workers}`);
  const store = await new PostgresStore({ connectionString: url, schema, poolSize: 4 }).open();
  const control = createTether({ agents: [loaderAgent(rounds)], store, worker: false, secrets: false });
  const children: Worker[] = [];
  const reader = await pgReader(schema);
  try {
    for (let i = 0; i < workers; i++) children.push(await spawnWorker(schema, 500));
    const startAll = async (count: number): Promise<string[]> => {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 100) {
        const batch = await Promise.all(Array.from({ length: Math.min(100, count - i) }, (_, j) => control.start("loader", `topic ${i + j}`)));
        ids.push(...batch.map((r) => r.id));
      }
      return ids;
    };
    // Unmeasured: the workers' code is optimised by the JIT, as a worker's that has run a while.
    await startAll(clusterWarmupRuns);
    await allEnded(reader);
    const began = performance.now();
    const ids = await startAll(clusterRuns);
    const pauses = pauseWhileRunning(control, ids, reader);
    await allEnded(reader);
    const elapsedS = (performance.now() - began) / 1000;
    const { latencies, calls } = await pauses.stop();
    const row = {
      workers,
      runs: clusterRuns,
      runsPerSecond: clusterRuns / elapsedS,
      pauseP50Ms: percentile(latencies, 50),
      pauseP99Ms: percentile(latencies, 99),
      pauseCallP99Ms: percentile(calls, 99),
      pauses: latencies.length,
    };
    console.log(`  ${workers} worker${workers === 1 ? " " : "s"}  ${fmt(row.runsPerSecond)} runs/s   cross-process pause p50 ${fmt(row.pauseP50Ms)} ms p99 ${fmt(row.pauseP99Ms)} ms (${latencies.length}; the call p99 ${fmt(row.pauseCallP99Ms)} ms)`);
    return row;
  } finally {
    await reader.close();
    await Promise.all(children.map((c) => c.stop()));
    await control.close();
    await store.close();
    await dropSchema(schema);
  }
}

// 4. Memory of a worker with many paused runs.

async function pausedMemory(): Promise<Record<string, unknown>> {
  const emptySchema = schemaName("idle");
  const fullSchema = schemaName("paused");
  const store = await new PostgresStore({ connectionString: url, schema: fullSchema, poolSize: 8 }).open();
  // Runs paused by a person while their first model call streams, 1,000 at a time: at 2 tokens/s
  // that call outlasts the pauses (at 100 tokens/s a run could end before its pause landed).
  const control = createTether({ agents: [loaderAgent(rounds, { tokensPerSecond: 2 })], store, concurrency: 1000, secrets: false });
  control.startWorker();
  try {
    for (let i = 0; i < pausedRuns; i += 1000) {
      const batch = await Promise.all(Array.from({ length: Math.min(1000, pausedRuns - i) }, (_, j) => control.start("loader", `topic ${i + j}`)));
      await Promise.all(
        batch.map(async (run) => {
          for (;;) {
            try {
              await control.pause(run.id, { reason: "bench", wait: true });
              return;
            } catch (error) {
              // Still queued: not claimed yet. Any other status (it ended) is an error, not a retry.
              if ((error as { code?: string }).code !== "illegal_transition" || (await store.getRun(run.id))?.status !== "queued") throw error;
              await sleep(50);
            }
          }
        }),
      );
    }
    const paused = (await store.listRuns({ status: ["paused"], limit: pausedRuns + 1 })).length;
    if (paused !== pausedRuns) throw new Error(`${paused} of ${pausedRuns} runs paused`);
    await control.close();
    const rssOf = async (schema: string) => {
      const worker = await spawnWorker(schema, 200);
      try {
        await sleep(3000);
        return await worker.request<{ rss: number; executing: number }>("rss");
      } finally {
        await worker.stop();
      }
    };
    const idle = await rssOf(emptySchema);
    const full = await rssOf(fullSchema);
    const row = { pausedRuns, idleRssMb: idle.rss / 2 ** 20, withPausedRssMb: full.rss / 2 ** 20, executing: full.executing };
    console.log(`  worker RSS: idle ${fmt(row.idleRssMb)} MB, with ${pausedRuns} paused runs ${fmt(row.withPausedRssMb)} MB (executing ${full.executing})`);
    return row;
  } finally {
    await control.close();
    await store.close();
    await dropSchema(fullSchema);
    await dropSchema(emptySchema);
  }
}

async function main(): Promise<void> {
  const skip = new Set((process.env.SCALE_SKIP ?? "").split(",").filter(Boolean));
  const results: Record<string, unknown> = { node: process.version, loadAverageBefore: loadavg()[0] };
  if (!skip.has("overhead")) {
    console.log("PostgreSQL durable overhead per step (~1 KB a step) against one INSERT + commit:");
    results.overhead = await overhead();
  }
  if (!skip.has("concurrency")) {
    console.log(`One worker, ${concurrentRuns} concurrent tool-loop runs:`);
    const rows = [];
    for (const kind of (process.env.SCALE_STORES ?? "sqlite,postgres").split(",") as ("sqlite" | "postgres")[]) rows.push(...(await concurrency(kind)));
    results.concurrency = rows;
  }
  if (!skip.has("cluster")) {
    console.log(`Worker processes on one PostgreSQL schema, ${clusterRuns} runs:`);
    const rows = [];
    for (const n of workerCounts) rows.push(await cluster(n));
    results.cluster = rows;
  }
  if (!skip.has("memory")) {
    console.log("Paused runs cost a worker nothing:");
    results.memory = await pausedMemory();
  }
  results.loadAverageAfter = loadavg()[0];
  writeFileSync(join(projectRoot, "bench-results-scale.json"), JSON.stringify(results, null, 2) + "\n");
  console.log(`load average ${fmt(Number(results.loadAverageBefore), 2)} → ${fmt(Number(results.loadAverageAfter), 2)}; written to bench-results-scale.json`);
}

await main();
