import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient, type RunStreamEvent } from "../../src/client/tether-client.js";
import { TetherClientError } from "../../src/client/client-error.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { createApiToken } from "../../src/server/tokens.js";
import { fixtureAgents, type FixtureLog } from "./fixture-agents.js";

describe("TetherClient against a real server", () => {
  let dir: string;
  let store: SqliteStore;
  let runtime: Runtime;
  let server: RunningServer;
  let client: TetherClient;
  let viewer: TetherClient;
  const log: FixtureLog = { executed: [], compensated: [] };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-client-"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: fixtureAgents({ tokensPerSecond: 200, rounds: 6 }, log), resolveModel: new ModelRegistry().resolver, compensation: { backoffMs: 10 } });
    runtime.startWorker();
    const admin = await createApiToken(store, { name: "alice", role: "admin" });
    const view = await createApiToken(store, { name: "val", role: "viewer" });
    server = await startServer({ runtime, host: "127.0.0.1", port: 0, version: "client-test", heartbeatMs: 500 });
    client = new TetherClient({ baseUrl: server.url, token: admin.token });
    viewer = new TetherClient({ baseUrl: `${server.url}/api/v1/`, token: view.token });
  });

  afterAll(async () => {
    await server.close();
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads health and agents", async () => {
    expect(await client.health()).toEqual({ ok: true, store: "sqlite", version: "client-test" });
    expect((await viewer.agents()).map((a) => a.name)).toEqual(["writer", "slow", "stale"]);
  });

  it("start → events (journal + live text) → pause → edit → resume → completed", async () => {
    const run = await client.start("writer", "hello", { budgets: { maxSteps: 50 } });
    expect(run.owner).toBe("alice");
    const controller = new AbortController();
    const events: RunStreamEvent[] = [];
    let paused = false;
    for await (const event of client.events(run.id, { signal: controller.signal })) {
      events.push(event);
      if (!paused && event.type === "delta") {
        paused = true;
        const view = await client.pause(run.id, { reason: "check" });
        expect(["pausing", "paused"]).toContain(view.status);
      }
      if (event.type === "journal" && event.entry.type === "status" && event.entry.data.to === "paused") {
        const state = await client.state(run.id);
        expect(state.state.messages.length).toBeGreaterThan(0);
        await client.editState(run.id, { message: "steer" });
        await client.resume(run.id, { message: "go" });
      }
      if (event.type === "journal" && event.entry.type === "status" && event.entry.data.to === "completed") controller.abort();
    }
    expect(paused).toBe(true);
    const journal = events.filter((e) => e.type === "journal");
    const stored = await client.journalAll(run.id);
    expect(journal.map((e) => e.seq)).toEqual(stored.map((e) => e.seq));
    // The pause, the edit and the resume each reached the run, in that order, with the actor.
    const pauseAt = stored.findIndex((e) => e.type === "control" && e.data.command === "pause");
    const pausedAt = stored.findIndex((e) => e.type === "status" && e.data.to === "paused");
    const editAt = stored.findIndex((e) => e.type === "state.message_added" && e.data.content === "steer");
    const resumeAt = stored.findIndex((e) => e.type === "control" && e.data.command === "resume");
    const completedAt = stored.findIndex((e) => e.type === "status" && e.data.to === "completed");
    expect(stored[pauseAt]?.data).toMatchObject({ actor: "alice", reason: "check" });
    expect(pauseAt).toBeGreaterThanOrEqual(0);
    expect([pauseAt < pausedAt, pausedAt < editAt, editAt < resumeAt, resumeAt < completedAt]).toEqual([true, true, true, true]);
    const finalState = await client.state(run.id);
    expect(finalState.state.messages.some((m) => JSON.stringify(m).includes("steer"))).toBe(true);
    expect(events.some((e) => e.type === "delta" && e.text.length > 0)).toBe(true);
    expect((await client.get(run.id)).status).toBe("completed");
    const page = await client.journal(run.id, { after: 2, limit: 2 });
    expect(page.entries.map((e) => e.seq)).toEqual([3, 4]);
    expect(page.next).toBe(4);
  });

  it("events resume after a given id with no duplicate", async () => {
    const run = await client.start("writer", "again");
    await runtime.waitFor(run.id, ["completed"]);
    const controller = new AbortController();
    const seqs: number[] = [];
    for await (const event of client.events(run.id, { after: 5, signal: controller.signal })) {
      if (event.type === "journal") seqs.push(event.seq);
      if (event.type === "journal" && event.entry.data.to === "completed") controller.abort();
    }
    expect(seqs[0]).toBe(6);
    expect(new Set(seqs).size).toBe(seqs.length);
    // The server let go of the subscription when the client went away.
    const deadline = Date.now() + 5_000;
    while (runtime.bus.hasListeners(run.id) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(runtime.bus.hasListeners(run.id)).toBe(false);
  });

  it("cancel preview, cancel, list, fork, halts", async () => {
    const run = await client.start("writer", "to cancel");
    await runtime.waitFor(run.id, (r) => r.step >= 2);
    await client.pause(run.id);
    await runtime.waitFor(run.id, ["paused"]);
    const preview = await client.cancelPreview(run.id);
    expect(preview.compensations.length).toBeGreaterThan(0);
    await client.cancel(run.id, { reason: "no" });
    const cancelled = await runtime.waitFor(run.id, ["cancelled"]);
    expect(cancelled.report?.compensated.length).toBe(preview.compensations.length);
    expect((await viewer.list({ status: ["cancelled"] })).map((r) => r.id)).toContain(run.id);
    const fork = await client.fork(run.id, { fromStep: 1 });
    expect(fork.forkedFrom).toEqual({ runId: run.id, step: 1 });
    await runtime.waitFor(fork.id, ["completed"]);
    const halt = await client.halt({ reason: "drill", agent: "slow" });
    expect(halt.scope).toBe("agent:slow");
    expect((await viewer.halts()).halts.map((h) => h.scope)).toEqual(["agent:slow"]);
    expect((await client.unhalt({ agent: "slow" })).scope).toBe("agent:slow");
  });

  it("throws TetherClientError with the code and status", async () => {
    const missing = await client.get("run_missing").catch((e: unknown) => e);
    expect(TetherClientError.isInstance(missing)).toBe(true);
    expect(missing).toMatchObject({ code: "run_not_found", status: 404 });
    const forbidden = await viewer.pause("run_missing").catch((e: unknown) => e);
    expect(forbidden).toMatchObject({ code: "forbidden", status: 403 });
    const anonymous = new TetherClient({ baseUrl: server.url });
    await expect(anonymous.list()).rejects.toMatchObject({ code: "unauthorized", status: 401 });
    const streamError = await (async () => {
      for await (const _ of client.events("run_missing")) return "no error";
    })().catch((e: unknown) => e);
    expect(streamError).toMatchObject({ code: "run_not_found", status: 404 });
    const nobody = new TetherClient({ baseUrl: "http://127.0.0.1:9" });
    await expect(nobody.health()).rejects.toMatchObject({ code: "unreachable", status: 0 });
  });

  it("runChanges streams run views", async () => {
    const controller = new AbortController();
    const run = await client.start("writer", "watch");
    const statuses: string[] = [];
    for await (const view of viewer.runChanges({ signal: controller.signal })) {
      if (view.id !== run.id) continue;
      statuses.push(view.status);
      if (view.status === "completed") controller.abort();
    }
    expect(statuses.at(-1)).toBe("completed");
  });
});
