import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { HaltedError, RunHaltedError, TetherError } from "../../src/engine/errors.js";
import type { Runtime } from "../../src/engine/runtime.js";
import type { AgentDefinition } from "../../src/engine/agent.js";
import { Runtime as LibraryRuntime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { effectTool, Ledger, sequenceAgent } from "../../src/testing/index.js";
import { approvalAgent, forkyAgent } from "./fixture-agents.js";
import { makeEnv, waitForEntry, type TestEnv } from "./helpers.js";

/** The shape of a value: its keys and the types of what they hold, not the values. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]));
  return value === null ? "null" : typeof value;
}


async function refusal(call: () => Promise<unknown>): Promise<TetherError> {
  const outcome = await call().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value).slice(0, 200)}`);
  if (!TetherError.isInstance(outcome.error)) throw outcome.error;
  return outcome.error;
}

describe("the same error from the library and through the HTTP client", () => {
  let env: TestEnv;
  let client: TetherClient;

  beforeAll(async () => {
    env = await makeEnv();
    client = new TetherClient({ baseUrl: "http://tether.test", token: env.tokens.admin, fetch: (request) => env.app.fetch(request) });
  });

  afterAll(async () => {
    await env.close();
  });

  /** Refused alike: same class, code, message and details (or, when they hold times, details of the same shape). */
  async function sameRefusal(code: string, act: (surface: Runtime | TetherClient) => Promise<unknown>, options: { detailsVary?: boolean } = {}) {
    const library = await refusal(() => act(env.runtime));
    const received = await refusal(() => act(client));
    expect(library.code).toBe(code);
    expect(received.code).toBe(code);
    expect(received).toBeInstanceOf(TetherError);
    expect(received.constructor).toBe(library.constructor);
    expect(received.name).toBe(library.name);
    expect(received.status).toBeGreaterThanOrEqual(400);
    expect(library.status).toBeUndefined();
    const sent = JSON.parse(JSON.stringify(library.details ?? null)) as unknown;
    if (options.detailsVary) expect(shape(received.details ?? null)).toEqual(shape(sent));
    else {
      expect(received.details ?? null).toEqual(sent);
      expect(received.message).toBe(library.message);
    }
    return { library, received };
  }

  it("refusals that need no run", async () => {
    await sameRefusal("run_not_found", (s) => s.get("run_missing"));
    await sameRefusal("unknown_agent", (s) => s.start("nobody", "x"));
  });

  it("refusals on a finished run", async () => {
    const run = await env.runtime.start("writer", "done soon");
    await env.runtime.waitFor(run.id, ["completed"]);
    await sameRefusal("illegal_transition", (s) => s.resume(run.id));
    await sameRefusal("illegal_transition", (s) => s.pause(run.id));
    await sameRefusal("invalid_input", (s) => s.fork(run.id, { fromStep: 999 }));
  });

  it("refusals on a run paused by its budget", async () => {
    const run = await env.runtime.start("writer", "one step", { budgets: { maxSteps: 1 } });
    await env.runtime.waitFor(run.id, ["paused"]);
    await sameRefusal("budget_exceeded", (s) => s.resume(run.id));
    const { received } = await sameRefusal("invalid_state_patch", (s) => s.editState(run.id, { patch: { vars: { topic: 5 } } }));
    expect(TetherError.isInstance(received, "invalid_state_patch") && received.details?.issues[0]?.path).toBe("topic");
    await sameRefusal("invalid_state_patch", (s) => s.editState(run.id, { patch: { other: 1 } }));
    await sameRefusal("no_pending_approval", (s) => s.approve(run.id));
  });

  it("a stale snapshot", async () => {
    const run = await env.runtime.start("stale", "x", { budgets: { maxSteps: 1 } });
    await env.runtime.waitFor(run.id, ["paused"]);
    env.clock.offsetMs += 61_000;
    try {
      const { received } = await sameRefusal("stale_snapshot", (s) => s.resume(run.id, { budgets: { maxSteps: 100 } }), { detailsVary: true });
      // Typed per code: `details.reasons` is a list of strings after the check.
      if (!TetherError.isInstance(received, "stale_snapshot")) throw received;
      expect(received.details.reasons[0]).toContain("old");
    } finally {
      env.clock.offsetMs -= 61_000;
    }
  });

  it("a halt: a start it refuses, and commands on the runs it holds", async () => {
    const run = await env.runtime.start("slow", "x");
    await waitForEntry(env, run.id, (e) => e.type === "call.started");
    await env.runtime.halt({ agent: "slow", reason: "drill" });
    try {
      await env.runtime.waitFor(run.id, ["halted"]);
      const start = await sameRefusal("halted", (s) => s.start("slow", "y"));
      expect(start.received).toBeInstanceOf(HaltedError);
      expect(start.received.details).toEqual({ scope: "agent:slow" });
      const pause = await sameRefusal("halted", (s) => s.pause(run.id));
      expect(pause.received).toBeInstanceOf(RunHaltedError);
      await sameRefusal("halted", (s) => s.resume(run.id));
      // Editing a halted run answers as pausing or resuming it does (not illegal_transition).
      await sameRefusal("halted", (s) => s.editState(run.id, { message: "x" }));
    } finally {
      await env.runtime.unhalt({ agent: "slow" });
    }
  });

  it("approvals and a cancel that live forks depend on", async () => {
    const ledger = new Ledger();
    const other = await makeEnv({ runtime: { agents: [approvalAgent(), forkyAgent(ledger)] } });
    const otherClient = new TetherClient({ baseUrl: "http://tether.test", token: other.tokens.admin, fetch: (request) => other.app.fetch(request) });
    const swap = { env, client };
    env = other;
    client = otherClient;
    try {
      const payer = await other.runtime.start("payer", "pay two");
      await other.runtime.waitFor(payer.id, ["paused"]);
      await sameRefusal("approval_pending", (s) => s.resume(payer.id));
      const [first] = (await other.runtime.get(payer.id)).approvals!;
      await other.runtime.approve(payer.id, { callSeq: first!.callSeq });
      await sameRefusal("already_decided", (s) => s.approve(payer.id, { callSeq: first!.callSeq }));
      await sameRefusal("no_pending_approval", (s) => s.reject(payer.id, { callSeq: 999, note: "no" }));

      const source = await other.runtime.start("forky", null);
      await other.runtime.waitFor(source.id, ["paused"]);
      const fork = await other.runtime.fork(source.id, { fromStep: 2 });
      await other.runtime.waitFor(fork.id, ["paused"]);
      const { received } = await sameRefusal("fork_inherits_effects", (s) => s.cancel(source.id));
      if (!TetherError.isInstance(received, "fork_inherits_effects")) throw received;
      expect(received.details.forks.map((f) => f.runId)).toEqual([fork.id]);
    } finally {
      env = swap.env;
      client = swap.client;
      await other.close();
    }
  });

  it("a run started under another version of its agent", async () => {
    const pinned = (version: string): AgentDefinition => ({
      ...sequenceAgent({ name: "pinned", tools: [effectTool({ name: "publish", ledger: new Ledger() })], steps: [{ tool: "publish", input: { id: "a" } }, { tool: "publish", input: { id: "b" } }], budgets: { maxSteps: 1 } }),
      version,
    });
    const other = await makeEnv({ runtime: { agents: [pinned("2")] } });
    const v1Store = new SqliteStore({ path: other.dbPath });
    const v1 = new LibraryRuntime({ store: v1Store, agents: [pinned("1")], resolveModel: new ModelRegistry().resolver });
    const swap = { env, client };
    env = other;
    client = new TetherClient({ baseUrl: "http://tether.test", token: other.tokens.admin, fetch: (request) => other.app.fetch(request) });
    try {
      const run = await v1.start("pinned", null);
      await v1.waitFor(run.id, ["paused"]);
      await v1.close();
      const { received } = await sameRefusal("version_mismatch", (s) => s.resume(run.id, { budgets: { maxSteps: 10 } }));
      expect(received.details).toEqual({ runId: run.id, agent: "pinned", runVersion: "1", currentVersion: "2" });
    } finally {
      env = swap.env;
      client = swap.client;
      await v1.close();
      await v1Store.close();
      await other.close();
    }
  });

  it("transport failures have their own code", async () => {
    const nobody = new TetherClient({ baseUrl: "http://127.0.0.1:9" });
    const error = await refusal(() => nobody.get("run_x"));
    expect(error).toBeInstanceOf(TetherError);
    expect(error).toMatchObject({ code: "unreachable", status: 0, details: { baseUrl: "http://127.0.0.1:9" } });
    const proxy = new TetherClient({ baseUrl: "http://tether.test", fetch: () => new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway" }) });
    expect(await refusal(() => proxy.get("run_x"))).toMatchObject({ code: "http_error", status: 502, details: { status: 502 } });
  });
});
