/**
 * The load campaign (`npm run load`): one worker process serving many concurrent runs over HTTP,
 * watched by SSE subscribers, while a person pauses and resumes runs through the API.
 *
 * - LOAD_RUNS (default 1000) tool-loop runs: the simulated model at 100 tokens/s, a 50 ms abortable
 *   tool, LOAD_ROUNDS (default 6) tool rounds, so about 13 steps each.
 * - LOAD_SUBSCRIBERS (default 100) SSE subscribers, each following one run's events from its start
 *   with the real client (TetherClient.events).
 * - control: every LOAD_CONTROL_MS (default 100) a running run (each at most once) is paused through
 *   the API, and resumed once paused; latency = from sending the pause to the run's `paused` as the API shows it.
 * Prints: steps per second, control latency p50/p99/max, SSE lag (journal entry written → received)
 * p50/p99/max, event-loop lag p50/p99 (bench/loop-lag.ts), peak RSS, and whether any subscriber
 * missed or duplicated an entry (it must be 0). Writes `bench-results-load.json`. The clients share the worker's process, so
 * the figures include their cost; the machine is shared, so read the ratios, not the absolutes.
 */
import { setMaxListeners } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { TetherClient } from "../src/client/tether-client.js";
import { createTether } from "../src/index.js";
import { loaderAgent } from "./loader-agent.js";
import { loopLag } from "./loop-lag.js";
import { startServer } from "../src/server/serve.js";
import { createApiToken } from "../src/server/tokens.js";
import { SqliteStore } from "../src/stores/sqlite-store.js";

const runs = Number(process.env.LOAD_RUNS ?? 1000);
const subscribers = Math.min(runs, Number(process.env.LOAD_SUBSCRIBERS ?? 100));
const rounds = Number(process.env.LOAD_ROUNDS ?? 6);
const controlEveryMs = Number(process.env.LOAD_CONTROL_MS ?? 100);

function percentile(values: number[], p: number): number {
  if (!values.length) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const fmt = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "-");

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "tether-load-"));
  const agent = loaderAgent(rounds);
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  const tether = createTether({ agents: [agent], store, concurrency: runs });
  tether.startWorker();
  const token = await createApiToken(store, { name: "load", role: "admin" });
  const server = await startServer({ runtime: tether, host: "127.0.0.1", port: 0, version: "load" });
  const client = new TetherClient({ baseUrl: server.url, token: token.token });

  const loop = loopLag(10);
  loop.enable();
  let peakRss = 0;
  const rssTimer = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);

  const started = performance.now();
  const ids: string[] = [];
  // Started through the API, 50 at a time, as many clients would.
  for (let i = 0; i < runs; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, runs - i) }, (_, j) => client.start("loader", `topic ${i + j}`)));
    ids.push(...batch.map((r) => r.id));
  }

  // Subscribers: each follows one run from its first entry until it ends.
  const stop = new AbortController();
  setMaxListeners(subscribers + 10, stop.signal);
  const lags: number[] = [];
  const received = new Map<string, number[]>();
  const followed = ids.filter((_, i) => i % Math.max(1, Math.floor(runs / subscribers)) === 0).slice(0, subscribers);
  const following = followed.map(async (id) => {
    const seqs: number[] = [];
    received.set(id, seqs);
    const controller = new AbortController();
    stop.signal.addEventListener("abort", () => controller.abort(), { once: true });
    // Lag counts live entries only: those written after the subscriber connected (the replay of
    // older ones is not lag).
    const connectedAt = Date.now();
    try {
      for await (const event of client.events(id, { signal: controller.signal, after: 0 })) {
        if (event.type !== "journal") continue;
        seqs.push(event.seq);
        if (event.entry.at >= connectedAt) lags.push(Date.now() - event.entry.at);
        // Stop reading here: entries after the end (a refused pause) may already be buffered.
        if (event.entry.type === "status" && ["completed", "failed", "cancelled"].includes(String(event.entry.data.to))) {
          controller.abort();
          break;
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  });

  // A person pausing and resuming running runs through the API, one at a time.
  const controlLatencies: number[] = [];
  const pausedOnce = new Set<string>();
  let controlErrors = 0;
  const stopControl = new AbortController();
  const controlling = (async () => {
    while (!stopControl.signal.aborted) {
      await new Promise((r) => setTimeout(r, controlEveryMs));
      // Each run is paused at most once: a run paused again and again never gets to finish its call.
      const running = (await tether.list({ status: ["running"], limit: 100_000 })).filter((r) => !pausedOnce.has(r.id));
      if (!running.length) continue;
      const id = running[Math.floor(Math.random() * running.length)].id;
      pausedOnce.add(id);
      const sent = performance.now();
      try {
        const view = await client.pause(id, { reason: "load check" });
        if (view.status !== "pausing" && view.status !== "paused") continue;
        for (;;) {
          const now = await client.get(id);
          if (now.status === "paused") break;
          if (now.status !== "pausing") throw new Error(`run ${id} went ${now.status} while pausing`);
          await new Promise((r) => setTimeout(r, 5));
        }
        controlLatencies.push(performance.now() - sent);
        await client.resume(id);
      } catch (error) {
        if ((error as { code?: string }).code !== "illegal_transition") {
          controlErrors++;
          if (process.env.LOAD_DEBUG) console.log(String(error));
        }
      }
    }
  })();

  const progress = process.env.LOAD_DEBUG
    ? setInterval(async () => {
        const counts: Record<string, number> = {};
        for (const r of await tether.list({ limit: 100_000 })) counts[`${r.status} ${r.statusReason ?? ""}`] = (counts[`${r.status} ${r.statusReason ?? ""}`] ?? 0) + 1;
        console.log(`  … ${((performance.now() - started) / 1000).toFixed(0)} s`, JSON.stringify(counts), `${controlLatencies.length} pauses`);
      }, 5_000)
    : undefined;
  const done = await Promise.all(ids.map((id) => tether.waitFor(id, ["completed", "failed", "cancelled"], { timeoutMs: 30 * 60_000 })));
  const elapsedS = (performance.now() - started) / 1000;
  clearInterval(progress);
  stopControl.abort();
  await controlling;
  // Each subscriber stops by itself at its run's last entry; the runs have ended, but their last
  // entries may still be on the way (SSE lag). Cutting the streams now would count those as missed.
  const grace = setTimeout(() => stop.abort(), 30_000);
  await Promise.all(following);
  clearTimeout(grace);
  stop.abort();
  clearInterval(rssTimer);
  loop.disable();

  let missed = 0;
  for (const [id, seqs] of received) {
    // Up to the run's end: later entries (a refused pause on a finished run) come after the subscriber stopped.
    const journal = await client.journalAll(id);
    const end = journal.findIndex((e) => e.type === "status" && ["completed", "failed", "cancelled"].includes(String(e.data.to)));
    const stored = journal.slice(0, end + 1).map((e) => e.seq);
    if (JSON.stringify(seqs) !== JSON.stringify(stored)) {
      missed++;
      if (process.env.LOAD_DEBUG) console.log(`  ${id}: received ${seqs.join(",")} stored ${stored.join(",")}`);
    }
  }
  const steps = done.reduce((sum, r) => sum + r.step, 0);
  const result = {
    runs,
    subscribers: followed.length,
    completed: done.filter((r) => r.status === "completed").length,
    steps,
    stepsPerSecond: steps / elapsedS,
    control: { samples: controlLatencies.length, p50Ms: percentile(controlLatencies, 50), p99Ms: percentile(controlLatencies, 99), maxMs: Math.max(...controlLatencies), errors: controlErrors },
    sseLag: { samples: lags.length, p50Ms: percentile(lags, 50), p99Ms: percentile(lags, 99), maxMs: Math.max(...lags) },
    eventLoopLag: { p50Ms: loop.lagMs(50), p99Ms: loop.lagMs(99), intervalP99Ms: loop.intervalMs(99) },
    peakRssMb: peakRss / 2 ** 20,
    subscribersWithAGapOrDuplicate: missed,
    loadAverage: loadavg()[0],
  };
  console.log(`load: ${runs} runs (${result.completed} completed, ${steps} steps) in ${elapsedS.toFixed(1)} s, ${followed.length} SSE subscribers, load average ${result.loadAverage.toFixed(2)}`);
  console.log(`  steps per second        ${fmt(result.stepsPerSecond)}`);
  console.log(`  pause latency (API)     p50 ${fmt(result.control.p50Ms)} ms, p99 ${fmt(result.control.p99Ms)} ms, max ${fmt(result.control.maxMs)} ms (${result.control.samples} pauses, ${controlErrors} errors)`);
  console.log(`  SSE lag                 p50 ${fmt(result.sseLag.p50Ms)} ms, p99 ${fmt(result.sseLag.p99Ms)} ms, max ${fmt(result.sseLag.maxMs)} ms (${lags.length} entries)`);
  console.log(`  event-loop lag          p50 ${fmt(result.eventLoopLag.p50Ms)} ms, p99 ${fmt(result.eventLoopLag.p99Ms)} ms (10 ms samples ${fmt(result.eventLoopLag.intervalP99Ms)} ms apart at p99)`);
  console.log(`  peak RSS                ${fmt(result.peakRssMb)} MB`);
  console.log(`  subscribers that missed or duplicated an entry: ${missed}`);
  writeFileSync(join(process.cwd(), "bench-results-load.json"), JSON.stringify(result, null, 2) + "\n");
  await server.close();
  await tether.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (missed > 0 || controlErrors > 0) process.exitCode = 1;
}

await main();
