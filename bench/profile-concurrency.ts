/**
 * A profiling driver for the one-worker concurrency case of bench/scale.ts: PROFILE_RUNS (default
 * 1000) loader runs at once on PROFILE_STORE (`sqlite`, the default, or `postgres`: a schema of its
 * own in the PostgreSQL at TETHER_TEST_DATABASE_URL, dropped afterwards); prints steps/s, CPU ms
 * per step, event-loop lag (bench/loop-lag.ts), and how busy the loop was (its share of the time, its active ms per
 * step). PROFILE_TOKENS_PER_SECOND (default 100; `Infinity` streams every token at once)
 * separates the engine's cost from the token stream's. PROFILE_LAG_AFTER (ms) starts the
 * loop-lag window that long after the start, past the runs' creation; PROFILE_KEEP keeps the
 * SQLite database and prints its path; PROFILE_COMMIT_BUDGET sets its `commitBudgetMs`.
 * PROFILE_ROUNDS (default 1) runs the whole batch that many times and measures the last: the
 * rounds before it warm the JIT, as a worker that has run for a while is (the first round of a
 * cold process runs much of its code unoptimised). Run it under
 * `node --cpu-prof --import tsx bench/profile-concurrency.ts` and summarise with bench/cpuprofile-summary.ts.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import pg from "pg";
import { createTether, SqliteStore, type Store } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { testDatabaseUrl } from "../src/testing/temp-postgres.js";
import { loaderAgent } from "./loader-agent.js";
import { loopLag } from "./loop-lag.js";

const runs = Number(process.env.PROFILE_RUNS ?? 1000);
const tokensPerSecond = Number(process.env.PROFILE_TOKENS_PER_SECOND ?? 100);
const kind = process.env.PROFILE_STORE === "postgres" ? "postgres" : "sqlite";

/** What the driver reads on a connection of its own: runs not yet ended, and the steps of all. */
interface Progress {
  open(): Promise<number>;
  steps(): Promise<number>;
  close(): Promise<void>;
}

async function openStore(): Promise<{ store: Store; progress: Progress }> {
  if (kind === "postgres") {
    const schema = `profile_${randomBytes(3).toString("hex")}`;
    const store = await new PostgresStore({ connectionString: testDatabaseUrl, schema, poolSize: 10 }).open();
    const client = new pg.Client({ connectionString: testDatabaseUrl });
    await client.connect();
    const count = async (sql: string) => Number((await client.query<{ n: string }>(sql)).rows[0].n);
    return {
      store,
      progress: {
        open: () => count(`SELECT count(*) AS n FROM "${schema}".runs WHERE status IN ('queued','running','pausing','paused')`),
        steps: () => count(`SELECT sum((doc::json ->> 'step')::int) AS n FROM "${schema}".runs`),
        async close() {
          await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await client.end();
        },
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "tether-prof-"));
  const path = join(dir, "tether.db");
  const store = new SqliteStore({ path, ...(process.env.PROFILE_COMMIT_BUDGET ? { commitBudgetMs: Number(process.env.PROFILE_COMMIT_BUDGET) } : {}) });
  const reader = new Database(path, { readonly: true });
  const open = reader.prepare("SELECT count(*) FROM runs WHERE status IN ('queued','running','pausing','paused')").pluck();
  const steps = reader.prepare("SELECT sum(json_extract(doc, '$.step')) FROM runs").pluck();
  return {
    store,
    progress: {
      open: async () => Number(open.get()),
      steps: async () => Number(steps.get()),
      async close() {
        reader.close();
        if (process.env.PROFILE_KEEP) console.log(path);
        else rmSync(dir, { recursive: true, force: true });
      },
    },
  };
}

const { store, progress } = await openStore();
const tether = createTether({ agents: [loaderAgent(6, { tokensPerSecond })], store, concurrency: runs, secrets: false });
tether.startWorker();
const loop = loopLag(5);
const rounds = Number(process.env.PROFILE_ROUNDS ?? 1);
let cpu0 = process.cpuUsage();
let busy0 = performance.eventLoopUtilization();
let t0 = performance.now();
let stepsBefore = 0;
for (let round = 1; round <= rounds; round++) {
  if (round === rounds) {
    stepsBefore = await progress.steps();
    cpu0 = process.cpuUsage();
    busy0 = performance.eventLoopUtilization();
    t0 = performance.now();
    // Marks the measured round for a profile's reader (a preload that watches the loop).
    (globalThis as { profileMeasuredFrom?: bigint }).profileMeasuredFrom = process.hrtime.bigint();
    if (process.env.PROFILE_LAG_AFTER) setTimeout(() => loop.enable(), Number(process.env.PROFILE_LAG_AFTER));
    else loop.enable();
  }
  for (let i = 0; i < runs; i += 100) await Promise.all(Array.from({ length: Math.min(100, runs - i) }, (_, j) => tether.start("loader", `topic ${i + j}`)));
  for (;;) {
    if ((await progress.open()) === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
}
const s = (performance.now() - t0) / 1000;
loop.disable();
const cpu = process.cpuUsage(cpu0);
const busy = performance.eventLoopUtilization(busy0);
const steps = (await progress.steps()) - stepsBefore;
console.log(JSON.stringify({ store: kind, runs, tokensPerSecond, steps, stepsPerSecond: +(steps / s).toFixed(1), cpuMsPerStep: +((cpu.user + cpu.system) / 1000 / steps).toFixed(3), lagP50: +loop.lagMs(50).toFixed(1), lagP99: +loop.lagMs(99).toFixed(1), intervalP99: +loop.intervalMs(99).toFixed(1), loopBusy: +busy.utilization.toFixed(3), loopMsPerStep: +(busy.active / steps).toFixed(3) }));
await tether.close();
await store.close();
await progress.close();
