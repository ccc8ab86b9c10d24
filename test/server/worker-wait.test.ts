import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { createApp } from "../../src/server/app.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { systemClock, type Clock } from "../../src/engine/clock.js";
import { fixtureAgents } from "./fixture-agents.js";

/** `waitingForWorker` in the run view: a run that no worker claims says so after a few seconds. */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("a run no worker has claimed", () => {
  it("reads waitingForWorker (since when, for how long) in GET /runs/:id and GET /runs after 3 s, and null once a worker holds it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tether-worker-wait-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const store = new SqliteStore({ path: join(dir, "t.db") });
    // A clock only the test moves, so the durations read are exact.
    let at = 1_000_000;
    const clock: Clock & { advance(ms: number): void } = { now: () => at, sleep: (ms, signal) => systemClock.sleep(ms, signal), advance: (ms) => void (at += ms) };
    // Control only, as `tether serve --no-worker` or a CLI on the database: nothing executes runs here.
    const runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, clock, worker: false });
    cleanups.push(async () => {
      await runtime.close();
      await store.close();
    });
    const app = createApp({ runtime, auth: { mode: "off" }, version: "test" });
    const get = async (path: string) => (await (await app.fetch(new Request(`http://tether.test/api/v1${path}`))).json()) as any;

    const run = await runtime.start("writer", "nobody runs me");
    expect((await get(`/runs/${run.id}`)).run).toMatchObject({ status: "queued", waitingForWorker: null });
    clock.advance(2_000);
    expect((await get(`/runs/${run.id}`)).run.waitingForWorker).toBeNull();
    clock.advance(1_500);
    expect((await get(`/runs/${run.id}`)).run.waitingForWorker).toEqual({ since: run.createdAt, forMs: 3_500 });
    const listed = (await get(`/runs`)).runs.find((r: { id: string }) => r.id === run.id);
    expect(listed.waitingForWorker).toEqual({ since: run.createdAt, forMs: 3_500 });

    // A worker claims it: no longer waiting.
    const worker = new Runtime({ store: new SqliteStore({ path: join(dir, "t.db") }), agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, clock, workerPollMs: 10 });
    cleanups.push(async () => {
      await worker.close();
      await worker.store.close();
    });
    worker.startWorker();
    await worker.waitFor(run.id, (r) => r.lease !== null);
    expect((await get(`/runs/${run.id}`)).run.waitingForWorker).toBeNull();
  });
});
