import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { systemClock, type Clock } from "../engine/clock.js";
import type { Runtime } from "../engine/runtime.js";
import type { JournalEntry } from "../engine/store.js";
import { tool } from "../engine/tool.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { harness, TestClock, type Harness } from "../testing/index.js";
import type { RunWaitingPayload } from "./webhook-payload.js";
import { verifyWebhookSignature } from "./webhook-signature.js";
import { startWebhookNotifier, type WebhookNotifier, type WebhookNotifierOptions } from "./webhooks.js";

/**
 * The webhook notifier against a real HTTP receiver on loopback and a real runtime: a run that
 * trips its step budget waits for a person, and the receiver is told, once per wait, signed.
 */

const secret = "whsec_4f1d2c3b5a6e7f8091a2b3c4d5e6f708";

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** An HTTP server on 127.0.0.1 that records every request and answers `status(n)` to the n-th. */
async function receiver(status: (n: number) => number = () => 200): Promise<{ url: string; requests: Received[]; close(): Promise<void> }> {
  const requests: Received[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      requests.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") });
      response.statusCode = status(requests.length);
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    // The path stands for a secret in the URL (as a Slack hook has): it must never reach the journal.
    url: `http://127.0.0.1:${port}/hooks/T0SECRETPATH`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const search = tool({ name: "search", description: "Search", input: z.object({ query: z.string() }), idempotent: true, execute: ({ query }) => ({ hits: [query] }) });
const researcher = toolLoopAgent({
  name: "researcher",
  version: "3",
  tools: [search],
  model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script: ({ turn }) => ({ text: `Turn ${turn}.`, toolCalls: [{ toolName: "search", input: { query: `q${turn}` } }] }) }),
  maxTurns: 50,
});

let h: Harness | undefined;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await h?.cleanup();
  h = undefined;
});

async function setup(status?: (n: number) => number) {
  h = harness([researcher]);
  const hook = await receiver(status);
  cleanups.push(hook.close);
  return { rt: h.runtime, hook };
}

function notify(rt: Runtime, options: Partial<WebhookNotifierOptions> & { url: string }): WebhookNotifier {
  const notifier = startWebhookNotifier(rt, { webhooks: [{ url: options.url, secret }], publicUrl: "https://tether.example.com/", backoffMs: 20, ...options });
  cleanups.push(() => notifier.stop());
  return notifier;
}

/** Starts a run that pauses on its step budget, and returns it once paused. */
async function budgetPaused(rt: Runtime, maxSteps = 2) {
  const run = await rt.start("researcher", "dig", { budgets: { maxSteps } });
  return rt.waitFor(run.id, ["paused"]);
}

async function journalOf(rt: Runtime, runId: string): Promise<JournalEntry[]> {
  return rt.journal(runId, { limit: 100_000 });
}

const deliveries = (journal: JournalEntry[]) => journal.filter((e) => e.type === "webhook.delivery");
const pauses = (journal: JournalEntry[]) => journal.filter((e) => e.type === "status" && e.data.to === "paused");

describe("webhooks: a run that waits for a person", () => {
  it("sends exactly one signed delivery per wait, naming the run, the reason, since when and the links to act", async () => {
    const { rt, hook } = await setup();
    const notifier = notify(rt, { url: hook.url });
    await notifier.caughtUp;
    const paused = await budgetPaused(rt);
    await notifier.idle();

    expect(hook.requests).toHaveLength(1);
    const [request] = hook.requests;
    expect(verifyWebhookSignature({ body: request.body, header: request.headers["tether-signature"] as string, secret })).toMatchObject({ valid: true });
    expect(verifyWebhookSignature({ body: request.body.replace("budget_steps", "budget_stepz"), header: request.headers["tether-signature"] as string, secret })).toMatchObject({ valid: false });
    let journal = await journalOf(rt, paused.id);
    const [pause] = pauses(journal);
    const body = JSON.parse(request.body) as RunWaitingPayload;
    expect(body).toEqual({
      id: `${paused.id}.${pause.seq}`,
      type: "run.waiting",
      run: { id: paused.id, agent: "researcher", agentVersion: "3", owner: "local", status: "paused", step: 2 },
      reason: "budget_steps",
      detail: "budget_steps: 2 of 2 steps",
      since: new Date(pause.at).toISOString(),
      waitSeq: pause.seq,
      links: {
        dashboard: `https://tether.example.com/runs/${paused.id}`,
        resume: `https://tether.example.com/api/v1/runs/${paused.id}/resume`,
        cancel: `https://tether.example.com/api/v1/runs/${paused.id}/cancel`,
      },
    });
    expect(request.headers).toMatchObject({ "content-type": "application/json", "tether-event": "run.waiting", "tether-delivery": body.id, "tether-attempt": "1" });
    expect(deliveries(journal).map((e) => e.data)).toEqual([
      { webhook: expect.stringMatching(/^wh_[0-9a-f]{12}$/), target: new URL(hook.url).origin, waitSeq: pause.seq, reason: "budget_steps", attempt: 1, outcome: "delivered", status: 200, durationMs: expect.any(Number) },
    ]);
    expect(JSON.stringify(journal)).not.toContain("T0SECRETPATH");
    expect(JSON.stringify(journal)).not.toContain(secret);

    // Raised and resumed, it trips the new budget: a second wait, a second delivery, and no more.
    await rt.resume(paused.id, { budgets: { maxSteps: 4 } });
    await rt.waitFor(paused.id, (r) => r.status === "paused" && r.step === 4);
    await notifier.idle();
    journal = await journalOf(rt, paused.id);
    const ids = hook.requests.map((r) => (JSON.parse(r.body) as RunWaitingPayload).id);
    expect(ids).toEqual(pauses(journal).map((p) => `${paused.id}.${p.seq}`));
    expect(deliveries(journal).map((e) => [e.data.waitSeq, e.data.outcome])).toEqual(pauses(journal).map((p) => [p.seq, "delivered"]));
  });

  it("tells nobody of a run a person paused, nor a webhook that does not want the reason", async () => {
    const { rt, hook } = await setup();
    const other = await receiver();
    cleanups.push(other.close);
    const notifier = startWebhookNotifier(rt, {
      webhooks: [
        { url: hook.url, secret },
        { url: other.url, secret, events: ["approval_required", "uncertain_effect"], name: "approvals" },
      ],
      publicUrl: "https://tether.example.com",
    });
    cleanups.push(() => notifier.stop());
    const run = await rt.start("researcher", "dig", { model: "simulated:sim-1?tps=20" });
    await rt.waitFor(run.id, ["running"]);
    await rt.pause(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["paused"]);
    const budget = await budgetPaused(rt);
    await notifier.idle();
    expect(hook.requests.map((r) => (JSON.parse(r.body) as RunWaitingPayload).run.id)).toEqual([budget.id]);
    expect(other.requests).toEqual([]);
    expect(deliveries(await journalOf(rt, run.id))).toEqual([]);
  });

  it("a receiver that answers 500 once gets the same delivery again after the backoff", async () => {
    const { rt, hook } = await setup((n) => (n === 1 ? 500 : 204));
    const clock = new TestClock();
    const notifier = notify(rt, { url: hook.url, clock, backoffMs: 40 });
    const paused = await budgetPaused(rt);
    await notifier.idle();

    expect(hook.requests).toHaveLength(2);
    expect(hook.requests[1].body).toBe(hook.requests[0].body);
    expect(hook.requests.map((r) => [r.headers["tether-delivery"], r.headers["tether-attempt"]])).toEqual([
      [hook.requests[0].headers["tether-delivery"], "1"],
      [hook.requests[0].headers["tether-delivery"], "2"],
    ]);
    for (const r of hook.requests) expect(verifyWebhookSignature({ body: r.body, header: r.headers["tether-signature"] as string, secret }).valid).toBe(true);
    expect(clock.sleeps).toEqual([40]);
    const journal = await journalOf(rt, paused.id);
    expect(deliveries(journal).map((e) => [e.data.attempt, e.data.outcome, e.data.status, e.data.retryInMs])).toEqual([
      [1, "retrying", 500, 40],
      [2, "delivered", 204, undefined],
    ]);
  });

  it("backs off exponentially and gives up after maxAttempts; an unreachable receiver is journaled with why", async () => {
    const { rt, hook } = await setup(() => 503);
    const gone = await receiver();
    await gone.close();
    const clock = new TestClock();
    const notifier = startWebhookNotifier(rt, {
      webhooks: [
        { url: hook.url, secret, name: "ops" },
        { url: gone.url, secret, name: "gone" },
      ],
      publicUrl: "https://tether.example.com",
      clock,
      backoffMs: 10,
      maxAttempts: 3,
    });
    cleanups.push(() => notifier.stop());
    const paused = await budgetPaused(rt);
    await notifier.idle();
    expect(hook.requests).toHaveLength(3);
    expect(clock.sleeps.sort((a, b) => a - b)).toEqual([10, 10, 20, 20]);
    const journal = deliveries(await journalOf(rt, paused.id));
    expect(journal.filter((e) => e.data.webhook === "ops").map((e) => [e.data.attempt, e.data.outcome, e.data.status])).toEqual([
      [1, "retrying", 503],
      [2, "retrying", 503],
      [3, "gave_up", 503],
    ]);
    expect(journal.filter((e) => e.data.webhook === "gone").map((e) => [e.data.attempt, e.data.outcome, e.data.error])).toEqual([
      [1, "retrying", "ECONNREFUSED"],
      [2, "retrying", "ECONNREFUSED"],
      [3, "gave_up", "ECONNREFUSED"],
    ]);
  });

  it("stops retrying once the run no longer waits", async () => {
    const { rt, hook } = await setup(() => 500);
    let release: () => void = () => undefined;
    const gated: Clock = { now: () => Date.now(), sleep: (_ms, signal) => new Promise((resolve, reject) => {
      release = resolve;
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    }) };
    const notifier = notify(rt, { url: hook.url, clock: gated });
    const paused = await budgetPaused(rt);
    await waitForDeliveries(rt, paused.id, 1);
    await rt.resume(paused.id, { budgets: { maxSteps: 1000 } });
    await rt.waitFor(paused.id, ["running", "completed"]);
    release();
    await notifier.idle();
    expect(hook.requests).toHaveLength(1);
    expect(deliveries(await journalOf(rt, paused.id)).map((e) => e.data.outcome)).toEqual(["retrying"]);
  });
});

async function waitForDeliveries(rt: Runtime, runId: string, count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (deliveries(await journalOf(rt, runId)).length < count) {
    if (Date.now() > deadline) throw new Error(`no ${count} deliveries journaled`);
    await systemClock.sleep(5);
  }
}

describe("webhooks: restarts", () => {
  it("a restarted notifier does not deliver again, and delivers what waited while none ran", async () => {
    const { rt, hook } = await setup();
    const first = notify(rt, { url: hook.url });
    const delivered = await budgetPaused(rt);
    await first.idle();
    await first.stop();
    expect(hook.requests).toHaveLength(1);

    // Paused while no notifier runs: nobody is told, until the next start catches up.
    const missed = await budgetPaused(rt);
    const second = notify(rt, { url: hook.url });
    await second.caughtUp;
    await second.idle();
    expect(hook.requests.map((r) => (JSON.parse(r.body) as RunWaitingPayload).run.id)).toEqual([delivered.id, missed.id]);

    const third = notify(rt, { url: hook.url });
    await third.caughtUp;
    await third.idle();
    expect(hook.requests).toHaveLength(2);
    for (const run of [delivered, missed]) expect(deliveries(await journalOf(rt, run.id)).map((e) => e.data.outcome)).toEqual(["delivered"]);
  });

  it("a wait whose deliveries gave up is tried again at the next start, its attempts counted on", async () => {
    let up = false;
    const { rt, hook } = await setup(() => (up ? 200 : 502));
    const first = notify(rt, { url: hook.url, maxAttempts: 2 });
    const paused = await budgetPaused(rt);
    await first.idle();
    await first.stop();
    up = true;
    const second = notify(rt, { url: hook.url, maxAttempts: 2 });
    await second.caughtUp;
    await second.idle();
    expect(hook.requests.map((r) => r.headers["tether-attempt"])).toEqual(["1", "2", "3"]);
    expect(deliveries(await journalOf(rt, paused.id)).map((e) => [e.data.attempt, e.data.outcome])).toEqual([
      [1, "retrying"],
      [2, "gave_up"],
      [3, "delivered"],
    ]);
  });
});

describe("webhooks: a call waiting for approval", () => {
  it("tells the receiver once, with the links to approve and reject, and again when the deadline passes with onApprovalTimeout wait", async () => {
    const clock = new TestClock();
    const transfer = tool({
      name: "transfer",
      description: "Move money",
      input: z.object({ amount: z.number() }),
      needsApproval: true,
      approvalTtlMs: 60_000,
      onApprovalTimeout: "wait",
      execute: ({ amount }) => ({ moved: amount }),
    });
    const banker = toolLoopAgent({
      name: "banker",
      tools: [transfer],
      model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script: ({ turn }) => (turn === 0 ? { text: "Moving.", toolCalls: [{ toolName: "transfer", input: { amount: 5 } }] } : { text: "Moved." }) }),
    });
    h = harness([banker], { clock });
    const rt = h.runtime;
    const hook = await receiver();
    cleanups.push(hook.close);
    const notifier = notify(rt, { url: hook.url, clock });
    await notifier.caughtUp;
    const run = await rt.start("banker", "move it");
    await rt.waitFor(run.id, ["paused"]);
    await notifier.idle();
    expect(hook.requests).toHaveLength(1);
    const first = JSON.parse(hook.requests[0].body) as RunWaitingPayload;
    expect(first).toMatchObject({ reason: "approval_required", links: { approve: `https://tether.example.com/api/v1/runs/${run.id}/approve`, reject: `https://tether.example.com/api/v1/runs/${run.id}/reject` } });

    clock.advance(60_001);
    await rt.expireApprovals();
    await notifier.idle();
    expect(hook.requests).toHaveLength(2);
    const again = JSON.parse(hook.requests[1].body) as RunWaitingPayload;
    const journal = await journalOf(rt, run.id);
    const expired = journal.find((e) => e.type === "approval.expired");
    expect(again).toMatchObject({ reason: "approval_required", waitSeq: expired?.seq });
    expect(again.id).not.toBe(first.id);
    expect(verifyWebhookSignature({ body: hook.requests[1].body, header: hook.requests[1].headers["tether-signature"] as string, secret }).valid).toBe(true);
    expect(deliveries(journal).map((e) => [e.data.waitSeq, e.data.outcome])).toEqual([
      [pauses(journal)[0].seq, "delivered"],
      [expired?.seq, "delivered"],
    ]);
  });
});

describe("webhooks: configuration", () => {
  it("refuses a configuration it cannot use, saying what to fix, without echoing the secret", async () => {
    h = harness([researcher]);
    const start = (options: Partial<WebhookNotifierOptions>) => () => startWebhookNotifier(h!.runtime, { webhooks: [], publicUrl: "https://tether.example.com", ...options });
    expect(start({ webhooks: [{ url: "hooks.example.com", secret }] })).toThrow(/webhooks\[0\]\.url must be an absolute http\(s\) URL/);
    expect(start({ webhooks: [{ url: "ftp://hooks.example.com", secret }] })).toThrow(/must use http or https/);
    expect(start({ webhooks: [{ url: "https://hooks.example.com", secret: "short-secret" }] })).toThrow(/secret must be a shared secret of at least 16 characters/);
    expect(start({ webhooks: [{ url: "https://hooks.example.com", secret, events: ["paused"] }] })).toThrow(/unknown reason "paused" \(known: approval_required/);
    expect(start({ webhooks: [{ url: "https://a.example.com", secret }, { url: "https://a.example.com", secret }] })).toThrow(/repeats webhook/);
    expect(start({ publicUrl: "tether.example.com" })).toThrow(/publicUrl must be the http\(s\) address/);
    try {
      start({ webhooks: [{ url: "https://hooks.example.com", secret: "short-secret" }] })();
    } catch (error) {
      expect(error).toMatchObject({ code: "invalid_input" });
      expect(String((error as Error).message)).not.toContain("short-secret");
    }
  });
});
