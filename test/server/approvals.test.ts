import { afterEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { TetherClient } from "../../src/client/tether-client.js";
import { createApp } from "../../src/server/app.js";
import { approvalAgent, fixtureAgents, type FixtureLog } from "./fixture-agents.js";
import { makeEnv, type TestEnv } from "./helpers.js";

let env: TestEnv | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await env?.close();
  env = undefined;
});

type Entry = { type: string; callSeq?: number; data: Record<string, unknown> };

async function payerEnv(): Promise<{ env: TestEnv; log: FixtureLog }> {
  const log: FixtureLog = { executed: [], compensated: [] };
  env = await makeEnv({ runtime: { agents: [...fixtureAgents(), approvalAgent(log)] } });
  return { env, log };
}

describe("POST /runs/:id/approve and /reject", () => {
  it("a viewer may not decide (403); an operator approves with edited arguments, journaled with the token's name", async () => {
    const { env, log } = await payerEnv();
    const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "payer", input: "pay acme" } });
    const id = started.body.run.id as string;
    await env.runtime.waitFor(id, ["paused"]);
    const shown = await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer });
    expect(shown.body.run).toMatchObject({ status: "paused", statusReason: "approval_required", approvals: [{ callSeq: 2, tool: "send_payment", input: { to: "acme", amount: 120 } }] });

    for (const path of ["approve", "reject"]) {
      const refused = await env.call("POST", `/runs/${id}/${path}`, { token: env.tokens.viewer, body: { note: "no" } });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe("forbidden");
    }
    expect((await env.call("POST", `/runs/${id}/reject`, { token: env.tokens.operator, body: {} })).status).toBe(400);
    expect((await env.call("POST", `/runs/${id}/approve`, { token: env.tokens.operator, body: { callSeq: 9 } })).body.error.code).toBe("no_pending_approval");
    expect((await env.call("POST", `/runs/${id}/resume`, { token: env.tokens.operator, body: {} })).body.error.code).toBe("approval_pending");
    expect(log.executed).toEqual([]);

    const approved = await env.call("POST", `/runs/${id}/approve`, { token: env.tokens.operator, body: { callSeq: 2, input: { to: "acme", amount: 100 }, note: "capped" } });
    expect(approved.status).toBe(200);
    expect(approved.body.decided).toMatchObject([{ callSeq: 2, decision: { decision: "approved", actor: "operator-token", input: { to: "acme", amount: 100 } } }]);
    await env.runtime.waitFor(id, ["completed", "failed"], { timeoutMs: 10_000 });
    expect(log.executed.map((l) => l.split(" ").slice(0, 3).join(" "))).toEqual(["send_payment acme 100"]);
    const again = await env.call("POST", `/runs/${id}/approve`, { token: env.tokens.operator, body: {} });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("already_decided");
    const journal = (await env.call("GET", `/runs/${id}/journal`, { token: env.tokens.viewer })).body.entries as Entry[];
    expect(journal.filter((e) => e.type === "approval.decided").map((e) => e.data)).toEqual([
      expect.objectContaining({ actor: "operator-token", decision: "approved", proposed: { to: "acme", amount: 120 }, approved: { to: "acme", amount: 100 }, edited: true, note: "capped" }),
    ]);
  });

  it("decided through the client from a process that does not execute runs: approve one call, reject the other", async () => {
    const { env, log } = await payerEnv();
    // The HTTP server runs in a control-only process; the worker is the test env's runtime.
    const store = new SqliteStore({ path: env.dbPath });
    const control = new Runtime({ store, agents: [...fixtureAgents(), approvalAgent()], resolveModel: new ModelRegistry().resolver, worker: false });
    closers.push(async () => {
      await control.close();
      await store.close();
    });
    const app = createApp({ runtime: control, auth: { mode: "tokens" }, version: "test" });
    const client = new TetherClient({ baseUrl: "http://tether.test", token: env.tokens.operator, fetch: (request) => app.fetch(request) });
    const run = await client.start("payer", "pay two suppliers");
    await env.runtime.waitFor(run.id, ["paused"], { timeoutMs: 10_000 });
    const first = await client.approve(run.id, { callSeq: 2 });
    expect(first.run.status).toBe("paused");
    const second = await client.reject(run.id, { callSeq: 3, note: "globex is not a supplier" });
    expect(second.run.status).toBe("running");
    await env.runtime.waitFor(run.id, ["completed", "failed"], { timeoutMs: 10_000 });
    expect(log.executed.map((l) => l.split(" ").slice(0, 2).join(" "))).toEqual(["send_payment acme"]);
    const state = await client.state(run.id);
    const refusal = state.state.messages.find((m) => m.role === "tool" && m.isError);
    expect(JSON.stringify(refusal)).toContain("globex is not a supplier");
  });
});
