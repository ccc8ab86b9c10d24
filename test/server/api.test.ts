import Database from "better-sqlite3";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import type { JournalEntry } from "../../src/engine/store.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { rowKey } from "../../src/stores/sqlite-schema.js";
import { createApp } from "../../src/server/app.js";
import type { Role, RunView } from "../../src/server/api-types.js";
import { createApiToken } from "../../src/server/tokens.js";
import { fixtureAgents } from "./fixture-agents.js";
import { isTerminalStatusEntry, journalOf, makeEnv, SseReader, stableFields, waitForEntry, type TestEnv } from "./helpers.js";

const runId = (body: { run: RunView }) => body.run.id;

async function startWriter(env: TestEnv, input: unknown = "write about pauses", token = env.tokens.operator): Promise<string> {
  const started = await env.call("POST", "/runs", { token, body: { agent: "writer", input } });
  expect(started.status).toBe(201);
  return runId(started.body);
}

/** A paused writer run with published drafts (effects that a cancel would compensate). */
async function pausedWriterWithEffects(env: TestEnv): Promise<string> {
  const id = await startWriter(env);
  await waitForEntry(env, id, (e) => e.type === "call.completed" && e.data.name === "publish_draft");
  const paused = await env.call("POST", `/runs/${id}/pause`, { token: env.tokens.operator, body: { reason: "to look" } });
  expect(paused.status).toBe(200);
  await env.runtime.waitFor(id, ["paused"]);
  return id;
}

/** What a refused request must leave alone: the record (minus bookkeeping) and the journal. */
async function observe(env: TestEnv, id: string) {
  return { run: stableFields(await env.runtime.get(id)), journal: await journalOf(env, id), effects: await env.store.listEffects(id) };
}

describe("HTTP API: routes", () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await makeEnv({ fixture: { tokensPerSecond: 300, rounds: 6 } });
  });
  afterAll(() => env.close());

  it("GET /healthz answers without a token", async () => {
    const health = await env.call("GET", "/healthz");
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ ok: true, store: "sqlite", version: "test" });
  });

  it("GET /whoami names the token and its role, and needs a token", async () => {
    for (const role of ["viewer", "operator", "admin"] as const) {
      const me = await env.call("GET", "/whoami", { token: env.tokens[role] });
      expect(me.status).toBe(200);
      expect(me.body).toEqual({ name: `${role}-token`, role });
    }
    const anonymous = await env.call("GET", "/whoami");
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe("unauthorized");
  });

  it("GET /agents lists agents with their tools and resources", async () => {
    const agents = await env.call("GET", "/agents", { token: env.tokens.viewer });
    expect(agents.status).toBe(200);
    const writer = agents.body.agents.find((a: { name: string }) => a.name === "writer");
    expect(writer).toMatchObject({ name: "writer", version: "1", description: expect.any(String), resources: [] });
    expect(writer.tools).toContainEqual({ name: "publish_draft", description: expect.any(String), compensates: true, idempotent: false, abortable: false });
    expect(writer.tools).toContainEqual(expect.objectContaining({ name: "lookup", compensates: false, idempotent: true }));
  });

  it("POST /runs starts a run owned by the token's name; GET /runs/:id, /journal and /state read it", async () => {
    const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "writer", input: { prompt: "hello" }, budgets: { maxSteps: 100 } } });
    expect(started.status).toBe(201);
    const view: RunView = started.body.run;
    expect(view).toMatchObject({ agent: "writer", owner: "operator-token", pendingCompensations: [], waitingForMs: null });
    expect(view.budgets.maxSteps).toBe(100);
    const done = await env.runtime.waitFor(view.id, ["completed"]);

    const got = await env.call("GET", `/runs/${view.id}`, { token: env.tokens.viewer });
    expect(got.status).toBe(200);
    expect(got.body.run).toMatchObject({ id: view.id, status: "completed", step: done.step, output: done.output, pendingCompensations: [], waitingForMs: null });

    const all = await journalOf(env, view.id);
    const first = await env.call("GET", `/runs/${view.id}/journal?limit=5`, { token: env.tokens.viewer });
    expect(first.body.entries.map((e: JournalEntry) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(first.body.next).toBe(5);
    const rest = await env.call("GET", `/runs/${view.id}/journal?after=5`, { token: env.tokens.viewer });
    expect(rest.body.entries.map((e: JournalEntry) => e.seq)).toEqual(all.slice(5).map((e) => e.seq));
    expect(rest.body.next).toBeNull();

    const state = await env.call("GET", `/runs/${view.id}/state`, { token: env.tokens.viewer });
    expect(state.status).toBe(200);
    expect(state.body.step).toBe(done.step);
    expect(state.body.snapshotAt).toBe(done.snapshotAt);
    expect(state.body.state.messages[0]).toEqual({ role: "user", content: "hello" });
    expect(state.body.state.messages.filter((m: { role: string }) => m.role === "assistant")).toHaveLength(7);
  });

  it("GET /runs filters by status and agent, with a limit", async () => {
    const completed = await env.call("GET", "/runs?status=completed&agent=writer&limit=1", { token: env.tokens.viewer });
    expect(completed.status).toBe(200);
    expect(completed.body.runs).toHaveLength(1);
    expect(completed.body.runs[0]).toMatchObject({ agent: "writer", status: "completed" });
    const none = await env.call("GET", "/runs?status=paused,halted&agent=slow", { token: env.tokens.viewer });
    expect(none.body.runs).toEqual([]);
  });

  it("pause → the view shows what a cancel would compensate; GET /cancel-preview agrees (newest first)", async () => {
    const id = await pausedWriterWithEffects(env);
    const view = (await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer })).body.run as RunView;
    expect(view.status).toBe("paused");
    expect(view.statusReason).toBe("to look");
    expect(view.pendingCompensations.length).toBeGreaterThan(0);
    expect(view.pendingCompensations.map((c) => c.tool)).toEqual(view.pendingCompensations.map(() => "publish_draft"));
    const seqs = view.pendingCompensations.map((c) => c.callSeq);
    expect([...seqs].sort((a, b) => b - a)).toEqual(seqs);
    const preview = await env.call("GET", `/runs/${id}/cancel-preview`, { token: env.tokens.viewer });
    expect(preview.status).toBe(200);
    expect(preview.body.compensations).toEqual(view.pendingCompensations);
    expect(preview.body.resources).toEqual([]);
    expect(preview.body.uncertain).toEqual([]);

    const control = (await journalOf(env, id)).find((e) => e.type === "control" && e.data.command === "pause");
    expect(control?.data).toMatchObject({ actor: "operator-token", reason: "to look" });
    const commands = await env.runtime.commands(id);
    expect(commands[0]).toMatchObject({ type: "pause", actor: "operator-token", reason: "to look" });
  });

  it("POST /state edits a paused run; resume carries a message; the run completes", async () => {
    const id = await pausedWriterWithEffects(env);
    const edited = await env.call("POST", `/runs/${id}/state`, { token: env.tokens.operator, body: { message: "focus on drafts", patch: { vars: { topic: "drafts" } } } });
    expect(edited.status).toBe(200);
    expect(edited.body.run.status).toBe("paused");
    const state = await env.call("GET", `/runs/${id}/state`, { token: env.tokens.viewer });
    expect(state.body.state.vars.topic).toBe("drafts");
    expect(state.body.state.messages.at(-1)).toEqual({ role: "user", content: "focus on drafts", author: "operator-token" });

    const resumed = await env.call("POST", `/runs/${id}/resume`, { token: env.tokens.operator, body: { message: "and be brief", reason: "looked" } });
    expect(resumed.status).toBe(200);
    expect(["running", "queued"]).toContain(resumed.body.run.status);
    await env.runtime.waitFor(id, ["completed"]);
    const journal = await journalOf(env, id);
    expect(journal.filter((e) => e.type === "state.message_added").map((e) => e.data.actor)).toEqual(["operator-token", "operator-token"]);
    expect(journal.find((e) => e.type === "state.patched")?.data.actor).toBe("operator-token");
  });

  it("POST /cancel runs every compensation newest first and reports it", async () => {
    const id = await pausedWriterWithEffects(env);
    const preview = (await env.call("GET", `/runs/${id}/cancel-preview`, { token: env.tokens.viewer })).body;
    env.log.compensated.length = 0;
    const cancelled = await env.call("POST", `/runs/${id}/cancel`, { token: env.tokens.operator, body: { reason: "wrong topic" } });
    expect(cancelled.status).toBe(200);
    expect(["cancelling", "cancelled"]).toContain(cancelled.body.run.status);
    const done = await env.runtime.waitFor(id, ["cancelled"]);
    expect(done.report?.compensated.map((c) => c.callSeq)).toEqual(preview.compensations.map((c: { callSeq: number }) => c.callSeq));
    expect(env.log.compensated).toEqual(preview.compensations.map((c: { input: { title: string } }) => `publish_draft ${c.input.title}`));
    const view = (await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer })).body.run;
    expect(view.pendingCompensations).toEqual([]);
    expect(view.report.compensated.length).toBe(preview.compensations.length);
  });

  it("POST /fork starts a new run from a completed step", async () => {
    const id = await startWriter(env);
    const source = await env.runtime.waitFor(id, ["completed"]);
    const forked = await env.call("POST", `/runs/${id}/fork`, { token: env.tokens.operator, body: { fromStep: 2 } });
    expect(forked.status).toBe(201);
    expect(forked.body.run).toMatchObject({ agent: "writer", forkedFrom: { runId: id, step: 2 }, owner: "operator-token", step: 2 });
    const done = await env.runtime.waitFor(forked.body.run.id, ["completed"]);
    expect(done.output).toBe(source.output);
  });

  it("waitingForMs shows how long a pausing run has waited on a tool that cannot be interrupted", async () => {
    const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "slow", input: "wait" } });
    const id = runId(started.body);
    await waitForEntry(env, id, (e) => e.type === "call.started" && e.data.name === "slow_lookup");
    const paused = await env.call("POST", `/runs/${id}/pause`, { token: env.tokens.operator });
    expect(paused.status).toBe(200);
    expect(paused.body.run.status).toBe("pausing");
    await new Promise((r) => setTimeout(r, 150));
    const view = (await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer })).body.run as RunView;
    expect(view.status).toBe("pausing");
    expect(view.waitingForMs).toBeGreaterThanOrEqual(100);
    expect(view.inflight?.name).toBe("slow_lookup");
    const done = await env.runtime.waitFor(id, ["paused"]);
    expect(done.waitingFor).toBeNull();
    expect((await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer })).body.run.waitingForMs).toBeNull();
  });

  it("halt: POST /halt halts running runs, GET /halt lists them, new runs are refused (409 halted), DELETE /halt leaves them paused", async () => {
    const id = await startWriter(env);
    await env.runtime.waitFor(id, ["running"]);
    const halted = await env.call("POST", "/halt", { token: env.tokens.admin, body: { reason: "incident", agent: "writer" } });
    expect(halted.status).toBe(200);
    expect(halted.body.scope).toBe("agent:writer");
    expect(halted.body.halted).toContain(id);
    const listing = await env.call("GET", "/halt", { token: env.tokens.viewer });
    expect(listing.body.halts).toEqual([expect.objectContaining({ scope: "agent:writer", actor: "admin-token", reason: "incident" })]);
    expect(listing.body.runs.map((r: RunView) => r.id)).toContain(id);
    const refused = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "writer", input: "x" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("halted");
    const lifted = await env.call("DELETE", "/halt?agent=writer", { token: env.tokens.admin });
    expect(lifted.status).toBe(200);
    expect(lifted.body).toEqual({ scope: "agent:writer", paused: expect.arrayContaining([id]), cancelling: [], failed: [] });
    expect((await env.runtime.get(id)).status).toBe("paused");
    expect((await env.call("GET", "/halt", { token: env.tokens.viewer })).body).toEqual({ halts: [], runs: [], damaged: [] });
    await env.call("POST", `/runs/${id}/cancel`, { token: env.tokens.operator });
  });

  it("GET /events sends a run view each time a run changes", async () => {
    const response = await env.app.fetch(env.request("GET", "/events", { token: env.tokens.viewer }));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const stream = new SseReader(response);
    const id = await startWriter(env);
    const seen = await stream.until((m) => m.event === "run" && JSON.parse(m.data).id === id && JSON.parse(m.data).status === "completed");
    await stream.close();
    const views = seen.filter((m) => m.event === "run").map((m) => JSON.parse(m.data) as RunView).filter((v) => v.id === id);
    expect(views.length).toBeGreaterThan(1);
    const versions = views.map((v) => v.version);
    expect([...versions].sort((a, b) => a - b)).toEqual(versions);
    expect(new Set(versions).size).toBe(versions.length);
    expect(views[0]).toHaveProperty("pendingCompensations");
  });
});

describe("HTTP API: event streams resume with no gap and no duplicate", () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await makeEnv({ fixture: { tokensPerSecond: 150, rounds: 4 } });
  });
  afterAll(() => env.close());

  async function open(id: string, headers: Record<string, string> = {}, query = "") {
    const response = await env.app.fetch(env.request("GET", `/runs/${id}/events${query}`, { token: env.tokens.viewer, headers }));
    expect(response.status).toBe(200);
    return new SseReader(response);
  }

  it("reconnecting with Last-Event-ID: <seq> continues after that entry", async () => {
    const id = await startWriter(env);
    const first = await open(id);
    const part = await first.until((m) => m.event === "journal" && JSON.parse(m.data).type === "call.completed");
    await first.close();
    const lastId = part.at(-1)!.id!;
    await new Promise((r) => setTimeout(r, 150));
    const second = await open(id, { "Last-Event-ID": lastId });
    const rest = await second.until(isTerminalStatusEntry);
    await second.close();
    const seqs = [...part, ...rest].filter((m) => m.event === "journal").map((m) => JSON.parse(m.data).seq as number);
    const stored = (await journalOf(env, id)).map((e) => e.seq);
    expect(seqs).toEqual(stored);
    expect(rest.filter((m) => m.event === "journal")[0].id).toBe(String(Number(lastId) + 1));
    const ids = [...part, ...rest].map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("reconnecting with Last-Event-ID: <seq>.<n> skips the live parts already seen", async () => {
    const id = await startWriter(env);
    const first = await open(id);
    const part = await first.until((m) => m.event === "delta" && Number(m.id!.split(".")[1]) >= 3);
    await first.close();
    const lastId = part.at(-1)!.id!;
    const second = await open(id, { "Last-Event-ID": lastId });
    const rest = await second.until(isTerminalStatusEntry);
    await second.close();
    const all = [...part, ...rest];
    const ids = all.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    const [lastSeq, lastSub] = lastId.split(".").map(Number);
    for (const m of rest.filter((x) => x.event === "delta")) {
      const [seq, sub] = m.id!.split(".").map(Number);
      expect(seq > lastSeq || (seq === lastSeq && sub > lastSub)).toBe(true);
    }
    const seqs = all.filter((m) => m.event === "journal").map((m) => JSON.parse(m.data).seq as number);
    expect(seqs).toEqual((await journalOf(env, id)).map((e) => e.seq));
    const delta = JSON.parse(part.at(-1)!.data);
    expect(delta).toEqual({ callSeq: expect.any(Number), text: expect.any(String), offset: expect.any(Number) });
    // Each delta says how much of its call's text came before it: the first of a call 0, then
    // the running length (the second stream, joined mid-call, starts past 0 and carries on).
    const deltas = all.filter((m) => m.event === "delta").map((m) => JSON.parse(m.data) as { callSeq: number; text: string; offset: number });
    const firstStream = deltas.slice(0, part.filter((m) => m.event === "delta").length);
    const length = new Map<number, number>();
    for (const d of firstStream) {
      expect(d.offset, JSON.stringify(d)).toBe(length.get(d.callSeq) ?? 0);
      length.set(d.callSeq, d.offset + d.text.length);
    }
    const resumed = deltas.slice(firstStream.length);
    if (resumed[0]?.callSeq === delta.callSeq) expect(resumed[0].offset).toBe(delta.offset + delta.text.length);
  });

  it("?after= works like Last-Event-ID, and a finished run replays from the journal", async () => {
    const id = await startWriter(env);
    await env.runtime.waitFor(id, ["completed"]);
    const stream = await open(id, {}, "?after=3");
    const rest = await stream.until(isTerminalStatusEntry);
    await stream.close();
    expect(rest.map((m) => m.event)).toEqual(rest.map(() => "journal"));
    expect(rest.map((m) => Number(m.id))).toEqual((await journalOf(env, id)).slice(3).map((e) => e.seq));
  });

  it("idle streams get heartbeat comments", async () => {
    const id = await startWriter(env);
    await env.runtime.waitFor(id, ["completed"]);
    const stream = await open(id);
    await stream.until(isTerminalStatusEntry);
    await new Promise((r) => setTimeout(r, 450));
    await stream.next(50).catch(() => undefined);
    await stream.close();
    expect(stream.raw).toContain(": heartbeat");
  });

  it("a bad Last-Event-ID is 400 invalid_input; an unknown run is 404 before any stream opens", async () => {
    const bad = await env.call("GET", "/runs/x/events", { token: env.tokens.viewer, headers: { "Last-Event-ID": "abc" } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_input");
    const missing = await env.call("GET", "/runs/run_missing/events", { token: env.tokens.viewer });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("run_not_found");
  });
});

describe("HTTP API: every error has its code and changes nothing", () => {
  let env: TestEnv;
  let paused: string;
  let completed: string;
  beforeAll(async () => {
    env = await makeEnv({ fixture: { tokensPerSecond: 300, rounds: 6 } });
    paused = await pausedWriterWithEffects(env);
    completed = await startWriter(env);
    await env.runtime.waitFor(completed, ["completed"]);
  });
  afterAll(() => env.close());

  const op = () => env.tokens.operator;

  /** The request is refused with `status`/`code`, and the paused run is exactly as before. */
  async function refusedWithoutChange(method: string, path: string, options: Parameters<TestEnv["call"]>[2], status: number, code: string) {
    const before = await observe(env, paused);
    const result = await env.call(method, path, options);
    expect({ status: result.status, code: result.body?.error?.code }).toEqual({ status, code });
    expect(typeof result.body.error.message).toBe("string");
    expect(result.body.error.message.length).toBeGreaterThan(0);
    expect(await observe(env, paused)).toEqual(before);
  }

  /**
   * Refused by the runtime while deciding a control command: the run and its effects are as
   * before, and the journal gains only the refused command (AGENTS.md, invariant 7).
   */
  async function refusedAsCommand(path: string, options: Parameters<TestEnv["call"]>[2], status: number, code: string, id = paused) {
    const before = await observe(env, id);
    const result = await env.call("POST", path, options);
    expect({ status: result.status, code: result.body?.error?.code }).toEqual({ status, code });
    const after = await observe(env, id);
    expect(after.run).toEqual(before.run);
    expect(after.effects).toEqual(before.effects);
    expect(after.journal.slice(0, before.journal.length)).toEqual(before.journal);
    expect(after.journal.slice(before.journal.length)).toEqual([expect.objectContaining({ type: "control", data: expect.objectContaining({ outcome: `refused: ${code}` }) })]);
  }

  it("malformed JSON → 400 invalid_input", async () => {
    for (const raw of ["{", "{\"reason\": }", "nul", "'x'", "{\"a\":1}}"]) {
      await refusedWithoutChange("POST", `/runs/${paused}/resume`, { token: op(), raw, headers: { "content-type": "application/json" } }, 400, "invalid_input");
    }
  });

  it("unknown fields → 400 invalid_input naming the field", async () => {
    const result = await env.call("POST", `/runs/${paused}/resume`, { token: op(), body: { force: true, forse: true } });
    expect(result.status).toBe(400);
    expect(result.body.error.message).toContain('"forse"');
    await refusedWithoutChange("POST", `/runs/${paused}/cancel`, { token: op(), body: { reason: "x", now: true } }, 400, "invalid_input");
    await refusedWithoutChange("POST", `/runs/${paused}/pause`, { token: op(), body: { immediately: true } }, 400, "invalid_input");
    await refusedWithoutChange("POST", `/runs/${paused}/state`, { token: op(), body: { message: "hi", vars: {} } }, 400, "invalid_input");
    await refusedWithoutChange("POST", `/runs/${paused}/fork`, { token: op(), body: { fromStep: 1, name: "x" } }, 400, "invalid_input");
    await refusedWithoutChange("POST", "/runs", { token: op(), body: { agent: "writer", input: "x", priority: 1 } }, 400, "invalid_input");
    await refusedWithoutChange("POST", "/halt", { token: env.tokens.admin, body: { reason: "x", scope: "*" } }, 400, "invalid_input");
    await refusedWithoutChange("POST", `/runs/${paused}/resume`, { token: op(), body: { budgets: { maxTokenz: 5 } } }, 400, "invalid_input");
  });

  it("wrong types and out-of-range values → 400 invalid_input", async () => {
    const cases: [string, string, unknown][] = [
      ["POST", `/runs/${paused}/resume`, null],
      ["POST", `/runs/${paused}/resume`, []],
      ["POST", `/runs/${paused}/resume`, "resume"],
      ["POST", `/runs/${paused}/resume`, 42],
      ["POST", `/runs/${paused}/resume`, { force: "yes" }],
      ["POST", `/runs/${paused}/resume`, { resolve: "maybe" }],
      ["POST", `/runs/${paused}/resume`, { message: 5 }],
      ["POST", `/runs/${paused}/resume`, { budgets: { maxTokens: -1 } }],
      ["POST", `/runs/${paused}/pause`, { mode: "later" }],
      ["POST", `/runs/${paused}/pause`, { reason: 7 }],
      ["POST", `/runs/${paused}/cancel`, { reason: ["x"] }],
      ["POST", `/runs/${paused}/state`, {}],
      ["POST", `/runs/${paused}/state`, { message: 1 }],
      ["POST", `/runs/${paused}/fork`, { fromStep: -1 }],
      ["POST", `/runs/${paused}/fork`, { fromStep: "1" }],
      ["POST", `/runs/${paused}/fork`, { fromStep: 1.5 }],
      ["POST", `/runs/${paused}/fork`, { fromStep: 10_000 }],
      ["POST", `/runs/${paused}/fork`, {}],
      ["POST", "/runs", {}],
      ["POST", "/runs", { agent: 5, input: "x" }],
      ["POST", "/runs", { agent: "writer" }],
      ["POST", "/runs", { agent: "writer", input: 5 }],
      ["POST", "/runs", { agent: "writer", input: "" }],
      ["POST", "/runs", { agent: "writer", input: "x", model: 3 }],
      ["POST", "/halt", {}],
      ["POST", "/halt", { reason: "" }],
    ];
    for (const [method, path, body] of cases) {
      const token = path === "/halt" ? env.tokens.admin : op();
      await refusedWithoutChange(method, path, { token, raw: JSON.stringify(body), headers: { "content-type": "application/json" } }, 400, "invalid_input");
    }
    for (const query of ["?status=done", "?limit=0", "?limit=abc", "?limit=5000"]) {
      await refusedWithoutChange("GET", `/runs${query}`, { token: env.tokens.viewer }, 400, "invalid_input");
    }
    await refusedWithoutChange("GET", `/runs/${paused}/journal?after=-1`, { token: env.tokens.viewer }, 400, "invalid_input");
    await refusedWithoutChange("GET", `/runs/${paused}/events?after=x.y`, { token: env.tokens.viewer }, 400, "invalid_input");
    expect(await env.runtime.list({ limit: 1000 })).toHaveLength(2);
    expect(await env.runtime.halts()).toEqual([]);
  });

  it("a bad state patch → 400 invalid_state_patch, on resume and on edit", async () => {
    await refusedAsCommand(`/runs/${paused}/resume`, { token: op(), body: { patch: "x" } }, 400, "invalid_state_patch");
    await refusedAsCommand(`/runs/${paused}/resume`, { token: op(), body: { patch: { vars: { topic: ["many"] } } } }, 400, "invalid_state_patch");
    await refusedWithoutChange("POST", `/runs/${paused}/state`, { token: op(), body: { patch: { vars: { topic: 5 } } } }, 400, "invalid_state_patch");
    await refusedWithoutChange("POST", `/runs/${paused}/state`, { token: op(), body: { message: "   " } }, 400, "invalid_state_patch");
  });

  it("an unknown model → 400 unknown_model; an unknown agent → 404 unknown_agent", async () => {
    await refusedWithoutChange("POST", "/runs", { token: op(), body: { agent: "writer", input: "x", model: "nope:model" } }, 400, "unknown_model");
    await refusedWithoutChange("POST", "/runs", { token: op(), body: { agent: "ghost", input: "x" } }, 404, "unknown_agent");
    expect(await env.runtime.list({ limit: 1000 })).toHaveLength(2);
  });

  it("the errors of a start point at the fix: where agents are registered, and the input the agent takes", async () => {
    const unknown = await env.call("POST", "/runs", { token: op(), body: { agent: "ghost", input: "x" } });
    expect(unknown.body.error.message).toMatch(/^no agent named "ghost" is registered \(known: [^)]*writer[^)]*\)\. Register it with createTether\(\{ agents: \[\.\.\.\] \}\); for the CLI, export it from tether\.config\.ts or pass --agents <file>$/);
    // A server that loaded its agents from a file says which, and what to change.
    const app = createApp({ runtime: env.runtime, auth: { mode: "tokens" }, version: "test", agentSource: "/srv/app/tether.config.ts" });
    const response = await app.fetch(env.request("POST", "/runs", { token: op(), body: { agent: "ghost", input: "x" } }));
    const body = await response.json();
    expect(response.status).toBe(404);
    expect(body.error).toMatchObject({ code: "unknown_agent", details: { name: "ghost", source: "/srv/app/tether.config.ts" } });
    expect(body.error.message).toMatch(/; loaded from \/srv\/app\/tether\.config\.ts\)\. Export it from tether\.config\.ts next to your package\.json \(export default \[myAgent\]\) or pass --agents <file>; tether serve loads agents when it starts$/);
    const invalid = await env.call("POST", "/runs", { token: op(), body: { agent: "writer", input: { prompt: "" } } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.message).toMatch(/^invalid input for agent writer: .+\. It takes: string \| \{ prompt: string \}$/);
    expect(await env.runtime.list({ limit: 1000 })).toHaveLength(2);
  });

  it("huge bodies → 413 payload_too_large, with or without Content-Length", async () => {
    const huge = JSON.stringify({ message: "x".repeat(1024 * 1024 + 10) });
    await refusedWithoutChange("POST", `/runs/${paused}/resume`, { token: op(), raw: huge, headers: { "content-type": "application/json", "content-length": String(huge.length) } }, 413, "payload_too_large");
    const chunks = new TextEncoder().encode(huge);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < chunks.length; i += 64 * 1024) controller.enqueue(chunks.slice(i, i + 64 * 1024));
        controller.close();
      },
    });
    await refusedWithoutChange("POST", `/runs/${paused}/state`, { token: op(), raw: stream, headers: { "content-type": "application/json" } }, 413, "payload_too_large");
    await refusedWithoutChange("POST", "/runs", { token: op(), raw: JSON.stringify({ agent: "writer", input: "y".repeat(1024 * 1024) }) }, 413, "payload_too_large");
  });

  it("unknown runs → 404 run_not_found on every run route; unknown routes → 404 not_found", async () => {
    const routes: [string, string, unknown?][] = [
      ["GET", "/runs/run_missing"],
      ["GET", "/runs/run_missing/journal"],
      ["GET", "/runs/run_missing/state"],
      ["GET", "/runs/run_missing/cancel-preview"],
      ["GET", "/runs/run_missing/events"],
      ["POST", "/runs/run_missing/pause", {}],
      ["POST", "/runs/run_missing/resume", {}],
      ["POST", "/runs/run_missing/cancel", {}],
      ["POST", "/runs/run_missing/state", { message: "hi" }],
      ["POST", "/runs/run_missing/fork", { fromStep: 0 }],
    ];
    for (const [method, path, body] of routes) await refusedWithoutChange(method, path, { token: op(), body }, 404, "run_not_found");
    await refusedWithoutChange("GET", "/nothing-here", { token: op() }, 404, "not_found");
    await refusedWithoutChange("POST", `/runs/${paused}/explode`, { token: op(), body: {} }, 404, "not_found");
    await refusedWithoutChange("GET", "/api/v2/runs", { token: op() }, 404, "not_found");
  });

  it("illegal transitions → 409 illegal_transition naming the status; only the refused command is journaled", async () => {
    for (const verb of ["pause", "resume", "cancel"]) {
      const before = await observe(env, completed);
      const result = await env.call("POST", `/runs/${completed}/${verb}`, { token: op(), body: {} });
      expect(result.status).toBe(409);
      expect(result.body.error).toMatchObject({ code: "illegal_transition", message: expect.stringContaining("completed"), details: { currentStatus: "completed" } });
      const after = await observe(env, completed);
      expect(after.run).toEqual(before.run);
      expect(after.effects).toEqual(before.effects);
      // Invariant 7: every control command shows in the journal, a refused one too.
      expect(after.journal.slice(0, before.journal.length)).toEqual(before.journal);
      expect(after.journal.slice(before.journal.length)).toEqual([
        expect.objectContaining({ type: "control", data: expect.objectContaining({ command: verb, outcome: "refused: illegal_transition", actor: "operator-token" }) }),
      ]);
    }
    const before = await observe(env, completed);
    const edit = await env.call("POST", `/runs/${completed}/state`, { token: op(), body: { message: "late" } });
    expect(edit.status).toBe(409);
    expect(edit.body.error.code).toBe("illegal_transition");
    expect(await observe(env, completed)).toEqual(before);
    // Refused by the runtime (not by validation): journaled as a refused command, nothing else.
    const pausedBefore = await observe(env, paused);
    const resolve = await env.call("POST", `/runs/${paused}/resume`, { token: op(), body: { resolve: "skip" } });
    expect(resolve.status).toBe(400);
    expect(resolve.body.error.code).toBe("invalid_input");
    const pausedAfter = await observe(env, paused);
    expect(pausedAfter.run).toEqual(pausedBefore.run);
    expect(pausedAfter.journal.slice(pausedBefore.journal.length)).toEqual([
      expect.objectContaining({ type: "control", data: expect.objectContaining({ command: "resume", outcome: "refused: invalid_input" }) }),
    ]);
  });

  it("a stale snapshot → 409 stale_snapshot unless forced", async () => {
    const started = await env.call("POST", "/runs", { token: op(), body: { agent: "stale", input: "x" } });
    const id = runId(started.body);
    await waitForEntry(env, id, (e) => e.type === "call.completed");
    await env.call("POST", `/runs/${id}/pause`, { token: op() });
    await env.runtime.waitFor(id, ["paused"]);
    env.clock.offsetMs += 61_000;
    try {
      const before = stableFields(await env.runtime.get(id));
      const refused = await env.call("POST", `/runs/${id}/resume`, { token: op() });
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe("stale_snapshot");
      expect(refused.body.error.details.reasons[0]).toContain("old");
      expect(stableFields(await env.runtime.get(id))).toEqual(before);
      const forced = await env.call("POST", `/runs/${id}/resume`, { token: op(), body: { force: true } });
      expect(forced.status).toBe(200);
      await env.runtime.waitFor(id, ["completed"]);
    } finally {
      env.clock.offsetMs -= 61_000;
    }
  });

  it("a corrupt snapshot → 409 snapshot_corrupt, and nothing is deleted", async () => {
    const id = await pausedWriterWithEffects(env);
    const db = new Database(env.dbPath);
    const { rk } = db.prepare("SELECT rk FROM runs WHERE id = ?").get(id) as { rk: number };
    const range = [rowKey(rk, 0), rowKey(rk + 1, 0)];
    db.prepare("UPDATE journal SET checksum = 'tampered' WHERE k = (SELECT MAX(k) FROM journal WHERE k >= ? AND k < ? AND snap_seq IS NOT NULL)").run(...range);
    // The damaged row fails its row checksum too (layout 5), so reading the journal through the
    // store refuses it: what was stored is compared row by row, as bytes.
    const rowsOf = () => ({
      run: db.prepare("SELECT status FROM runs WHERE id = ?").get(id) as { status: string },
      journal: db.prepare("SELECT * FROM journal WHERE k >= ? AND k < ? ORDER BY k").all(...range),
    });
    const before = rowsOf();
    const state = await env.call("GET", `/runs/${id}/state`, { token: env.tokens.viewer });
    expect(state.status).toBe(409);
    expect(state.body.error.code).toBe("snapshot_corrupt");
    expect(rowsOf()).toEqual(before);
    const resumed = await env.call("POST", `/runs/${id}/resume`, { token: op() });
    expect({ status: resumed.status, code: resumed.body?.error?.code }).toEqual({ status: 409, code: "snapshot_corrupt" });
    const after = rowsOf();
    // Refused as a command: the run is as it was, every row kept, and only the refusal recorded after them.
    expect(after.run.status).toBe(before.run.status);
    expect(after.journal.slice(0, before.journal.length)).toEqual(before.journal);
    expect(after.journal.length).toBeGreaterThan(before.journal.length);
    const rows = db.prepare("SELECT COUNT(*) AS n FROM journal WHERE k >= ? AND k < ? AND snap_seq IS NOT NULL").get(...range) as { n: number };
    expect(rows.n).toBeGreaterThan(0);
    db.close();
  });

  it("401 without a token, 401 with a bad one, 403 for a role too low", async () => {
    const none = await env.call("GET", "/runs");
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("unauthorized");
    const bad = await env.call("GET", "/runs", { token: "tether_not-a-token" });
    expect(bad.status).toBe(401);
    const malformed = await env.call("GET", "/runs", { headers: { authorization: "Basic abc" } });
    expect(malformed.status).toBe(401);
    await refusedWithoutChange("POST", `/runs/${paused}/cancel`, { token: env.tokens.viewer }, 403, "forbidden");
    await refusedWithoutChange("POST", `/runs/${paused}/resume`, {}, 401, "unauthorized");
    await refusedWithoutChange("POST", "/halt", { token: op(), body: { reason: "x" } }, 403, "forbidden");
    expect(await env.runtime.halts()).toEqual([]);
  });
});

describe("HTTP API: an uncertain effect after a worker is lost", () => {
  it("resume refuses with 409 uncertain_effect until a person resolves it", async () => {
    const env = await makeEnv({ fixture: { slowMs: 1_500 }, runtime: { leaseMs: 300 } });
    try {
      const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "slow", input: "x" } });
      const id = runId(started.body);
      await waitForEntry(env, id, (e) => e.type === "call.started" && e.data.name === "slow_lookup");
      // The worker goes away mid-call; a second worker (same store) takes the run over.
      await env.runtime.close();
      const takeover = new Runtime({ store: env.store, agents: fixtureAgents({ slowMs: 1_500 }), resolveModel: new ModelRegistry().resolver, leaseMs: 300 });
      takeover.startWorker();
      const app = createApp({ runtime: takeover, auth: { mode: "tokens" }, version: "test" });
      const call = async (path: string, body: unknown) => {
        const response = await app.fetch(env.request("POST", path, { token: env.tokens.operator, body }));
        return { status: response.status, body: await response.json() };
      };
      try {
        const uncertain = await takeover.waitFor(id, (r) => r.status === "paused" && r.inflight?.uncertain === true, { timeoutMs: 10_000 });
        expect(uncertain.statusReason).toBe("uncertain_effect");
        const preview = await app.fetch(env.request("GET", `/runs/${id}/cancel-preview`, { token: env.tokens.viewer }));
        expect((await preview.json()).uncertain).toEqual([{ callSeq: uncertain.inflight!.callSeq, tool: "slow_lookup" }]);
        const before = stableFields(await takeover.get(id));
        const refused = await call(`/runs/${id}/resume`, {});
        expect(refused.status).toBe(409);
        expect(refused.body.error.code).toBe("uncertain_effect");
        expect(stableFields(await takeover.get(id))).toEqual(before);
        const resolved = await call(`/runs/${id}/resume`, { resolve: { action: "done", result: { answer: "checked by hand" } } });
        expect(resolved.status).toBe(200);
        await takeover.waitFor(id, ["completed"], { timeoutMs: 10_000 });
        const journal = await journalOf(env, id);
        expect(journal.find((e) => e.type === "call.resolved")?.data).toMatchObject({ decision: "done", actor: "operator-token" });
      } finally {
        await takeover.close();
        await new Promise((r) => setTimeout(r, 1_300));
      }
    } finally {
      await env.close();
    }
  });
});

type RouteCase = { method: string; path: string; body?: unknown; role: Role | "none"; stream?: boolean };

describe("HTTP API: role matrix", () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await makeEnv();
  });
  afterAll(() => env.close());

  const missing = "run_missing";
  const routes: RouteCase[] = [
    { method: "GET", path: "/healthz", role: "none" },
    { method: "GET", path: "/agents", role: "viewer" },
    { method: "POST", path: "/runs", body: { agent: "ghost", input: "x" }, role: "operator" },
    { method: "GET", path: "/runs", role: "viewer" },
    { method: "GET", path: `/runs/${missing}`, role: "viewer" },
    { method: "GET", path: `/runs/${missing}/journal`, role: "viewer" },
    { method: "GET", path: `/runs/${missing}/state`, role: "viewer" },
    { method: "GET", path: `/runs/${missing}/cancel-preview`, role: "viewer" },
    { method: "GET", path: `/runs/${missing}/events`, role: "viewer" },
    { method: "GET", path: "/events", role: "viewer", stream: true },
    { method: "POST", path: `/runs/${missing}/pause`, body: {}, role: "operator" },
    { method: "POST", path: `/runs/${missing}/resume`, body: {}, role: "operator" },
    { method: "POST", path: `/runs/${missing}/cancel`, body: {}, role: "operator" },
    { method: "POST", path: `/runs/${missing}/state`, body: { message: "x" }, role: "operator" },
    { method: "POST", path: `/runs/${missing}/fork`, body: { fromStep: 0 }, role: "operator" },
    { method: "GET", path: "/halt", role: "viewer" },
    { method: "POST", path: "/halt", body: { reason: "matrix" }, role: "admin" },
    { method: "DELETE", path: "/halt", role: "admin" },
  ];
  const rank = { none: 0, viewer: 1, operator: 2, admin: 3 };

  it("each role × each route: allowed, or 403 forbidden; no token: 401 unauthorized", async () => {
    const table: string[] = [];
    for (const route of routes) {
      const row: string[] = [`${route.method} ${route.path}`];
      for (const caller of ["none", "viewer", "operator", "admin"] as const) {
        const response = await env.app.fetch(env.request(route.method, route.path, { token: caller === "none" ? undefined : env.tokens[caller], body: route.body }));
        const status = response.status;
        const body = route.stream && status === 200 ? undefined : await response.json();
        if (route.stream && status === 200) await response.body!.cancel();
        row.push(`${caller}:${status}`);
        if (route.role === "none") expect(status).toBe(200);
        else if (caller === "none") expect({ status, code: body?.error.code }).toEqual({ status: 401, code: "unauthorized" });
        else if (rank[caller] < rank[route.role]) expect({ route: row[0], caller, status, code: body?.error.code }).toEqual({ route: row[0], caller, status: 403, code: "forbidden" });
        else {
          expect({ route: row[0], caller, allowed: status !== 401 && status !== 403 && status < 500 }).toEqual({ route: row[0], caller, allowed: true });
        }
      }
      table.push(row.join("  "));
    }
    expect(table).toHaveLength(routes.length);
  });

  it("a token in the URL is never accepted, not even on event streams (it would end up in logs and history)", async () => {
    for (const path of [`/events?token=${env.tokens.viewer}`, `/runs/${missing}/events?token=${env.tokens.viewer}`, `/runs?token=${env.tokens.viewer}`]) {
      const response = await env.call("GET", path);
      expect(response.status, path).toBe(401);
      expect(response.body.error.code).toBe("unauthorized");
    }
  });

  it("a revoked token is refused", async () => {
    const created = await createApiToken(env.store, { name: "gone", role: "admin" });
    const ok = await env.call("GET", "/runs", { token: created.token });
    expect(ok.status).toBe(200);
    const db = new Database(env.dbPath);
    db.prepare("UPDATE tokens SET revoked_at = ? WHERE id = ?").run(Date.now(), created.record.id);
    db.close();
    const refused = await env.call("GET", "/runs", { token: created.token });
    expect(refused.status).toBe(401);
  });

  it("a token revoked while its event streams are open loses them at the next heartbeat; other tokens' streams go on", async () => {
    const watcher = await createApiToken(env.store, { name: "watcher", role: "viewer" });
    const id = await startWriter(env);
    await env.runtime.waitFor(id, ["completed"]);
    const openStream = async (path: string, token: string) => {
      const response = await env.app.fetch(env.request("GET", path, { token }));
      expect(response.status).toBe(200);
      return new SseReader(response);
    };
    const runStream = await openStream(`/runs/${id}/events`, watcher.token);
    const feed = await openStream("/events", watcher.token);
    const other = await openStream(`/runs/${id}/events`, env.tokens.viewer);
    await runStream.until(isTerminalStatusEntry);
    await other.until(isTerminalStatusEntry);
    await env.store.revokeToken(watcher.record.id, Date.now());
    const ended = async (stream: SseReader) => {
      for (;;) await stream.next(2_000); // heartbeats are comments, not messages: only the end or the timeout leaves
    };
    // The heartbeat is 200 ms here: the streams end within two of them, with no message after the revocation.
    await expect(ended(runStream)).rejects.toThrow("the stream ended");
    await expect(ended(feed)).rejects.toThrow("the stream ended");
    const heartbeats = other.raw.split(": heartbeat").length;
    await expect(other.next(600)).rejects.toThrow("no event within 600 ms");
    expect(other.raw.split(": heartbeat").length).toBeGreaterThan(heartbeats);
    await other.close();
    expect((await env.call("GET", `/runs/${id}/events`, { token: watcher.token })).status).toBe(401);
  });
});

describe("HTTP API: open mode, static dashboard", () => {
  it("open mode, chosen explicitly: requests act as anonymous admin, whatever the store holds", async () => {
    const env = await makeEnv({ auth: { mode: "open" }, withTokens: false });
    try {
      const started = await env.call("POST", "/runs", { body: { agent: "writer", input: "x" } });
      expect(started.status).toBe(201);
      expect(started.body.run.owner).toBe("anonymous");
      const id = runId(started.body);
      await env.runtime.waitFor(id, ["completed"]);
      expect((await env.call("POST", "/halt", { body: { reason: "open" } })).status).toBe(200);
      expect((await env.call("DELETE", "/halt")).status).toBe(200);
    } finally {
      await env.close();
    }
  });

  it("token mode with no token stored lets nobody in: the state of the database never opens the server", async () => {
    const env = await makeEnv({ auth: { mode: "tokens" }, withTokens: false });
    try {
      expect((await env.call("GET", "/runs")).status).toBe(401);
      expect((await env.call("POST", "/runs", { body: { agent: "writer", input: "x" } })).status).toBe(401);
      expect(await env.runtime.list()).toEqual([]);
    } finally {
      await env.close();
    }
  });

  it("serves the dashboard's files, falls back to index.html for app routes, and never leaves its folder", async () => {
    const env = await makeEnv();
    try {
      const root = join(env.dir, "dashboard");
      mkdirSync(join(root, "assets"), { recursive: true });
      writeFileSync(join(root, "index.html"), "<!doctype html><title>Tether</title>");
      writeFileSync(join(root, "assets", "app.js"), "console.log('tether')");
      writeFileSync(join(env.dir, "secret.txt"), "secret");
      const app = createApp({ runtime: env.runtime, auth: { mode: "tokens" }, version: "test", dashboardDir: root });
      const get = async (path: string) => {
        const response = await app.fetch(new Request(`http://tether.test${path}`));
        return { status: response.status, type: response.headers.get("content-type"), text: await response.text() };
      };
      expect(await get("/")).toMatchObject({ status: 200, type: expect.stringContaining("text/html"), text: expect.stringContaining("<title>Tether") });
      expect(await get("/runs/run_123")).toMatchObject({ status: 200, text: expect.stringContaining("<title>Tether") });
      expect(await get("/assets/app.js")).toMatchObject({ status: 200, type: expect.stringContaining("javascript") });
      expect((await get("/assets/missing.js")).status).toBe(404);
      expect((await get("/../secret.txt")).text).not.toContain("secret");
      expect((await get("/%2e%2e/secret.txt")).text).not.toContain("secret");
      const api = await get("/api/v1/nope");
      expect(api.status).toBe(404);
      expect(JSON.parse(api.text).error.code).toBe("not_found");
    } finally {
      await env.close();
    }
  });
});

describe("startServer", () => {
  it("refuses to serve with no token unless open mode is asked for, and open mode only on loopback", async () => {
    const { startServer, InsecureBindError, AuthNotConfiguredError } = await import("../../src/server/serve.js");
    const store = new SqliteStore({ path: ":memory:" });
    const runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
    try {
      const refused = startServer({ runtime, host: "127.0.0.1", port: 0 });
      await expect(refused).rejects.toBeInstanceOf(AuthNotConfiguredError);
      await expect(startServer({ runtime, host: "127.0.0.1", port: 0 })).rejects.toMatchObject({ code: "auth_not_configured", message: expect.stringMatching(/token create .*--open/) });
      await expect(startServer({ runtime, host: "0.0.0.0", port: 0, auth: { mode: "open" } })).rejects.toBeInstanceOf(InsecureBindError);
      const open = await startServer({ runtime, host: "127.0.0.1", port: 0, auth: { mode: "open" } });
      try {
        expect((await fetch(`${open.url}/api/v1/runs`)).status).toBe(200);
      } finally {
        await open.close();
      }
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("refuses a non-loopback host with no token, and serves one with a token", async () => {
    const { startServer, InsecureBindError } = await import("../../src/server/serve.js");
    const store = new SqliteStore({ path: ":memory:" });
    const runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
    try {
      await expect(startServer({ runtime, host: "0.0.0.0", port: 0 })).rejects.toBeInstanceOf(InsecureBindError);
      await expect(startServer({ runtime, host: "0.0.0.0", port: 0 })).rejects.toThrow(/token create/);
      const { token } = await createApiToken(store, { name: "ops", role: "admin" });
      const server = await startServer({ runtime, host: "0.0.0.0", port: 0 });
      try {
        const anonymous = await fetch(`http://127.0.0.1:${server.port}/api/v1/runs`);
        expect(anonymous.status).toBe(401);
        const authorized = await fetch(`http://127.0.0.1:${server.port}/api/v1/runs`, { headers: { authorization: `Bearer ${token}` } });
        expect(authorized.status).toBe(200);
      } finally {
        await server.close();
      }
      const local = await startServer({ runtime, host: "127.0.0.1", port: 0 });
      expect(local.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      await local.close();
    } finally {
      await runtime.close();
      await store.close();
    }
  });
});
