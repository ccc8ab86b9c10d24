import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { tool as aiTool } from "ai";
import { durableAgent } from "../agents/durable-agent.js";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { SimulatedModel, type SimulatedTurn } from "../models/simulated-model.js";
import { harness, sequenceAgent, TestClock, waitUntil, type Harness } from "../testing/index.js";
import { fromAiSdkTool } from "../tools/ai-sdk-tool.js";
import { TetherError } from "./errors.js";
import type { Json } from "./json.js";
import type { Message } from "./state.js";
import type { JournalEntry } from "./store.js";
import { tool, type AnyTool } from "./tool.js";
import { defineAgent, type Action } from "./agent.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** A payment tool that records every call it receives: what the tool saw. */
function payments(options: Partial<Pick<AnyTool, "needsApproval" | "approvalTtlMs" | "onApprovalTimeout">> = { needsApproval: true }) {
  const seen: { to: string; amount: number }[] = [];
  const pay = tool({
    name: "pay",
    description: "Send a payment",
    input: z.object({ to: z.string(), amount: z.number().positive() }),
    execute: (input) => {
      seen.push(input);
      return { paid: input.amount, to: input.to };
    },
    ...options,
  });
  return { pay, seen };
}

/** A model that asks for `calls` in its first turn and then answers; every request it got is kept. */
function scripted(calls: { toolName: string; input: Json }[]) {
  const requests: Message[][] = [];
  const model = new SimulatedModel({
    tokensPerSecond: Number.POSITIVE_INFINITY,
    script: ({ request, turn }): SimulatedTurn => {
      requests.push(request.messages.slice());
      return turn === 0 ? { text: "Paying.", toolCalls: calls } : { text: "Done." };
    },
  });
  return { model, requests };
}

const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => (TetherError.isInstance(e) ? e.code : String(e)));
const ofType = (journal: JournalEntry[], type: string) => journal.filter((e) => e.type === type);

describe("approval before a call", () => {
  it("pauses before the call with approval_required, shows the call, and runs it exactly once when approved", async () => {
    const { pay, seen } = payments();
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })]);
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toBe("approval_required");
    expect(paused.lease).toBeNull();
    await rt.settled(run.id);
    expect(rt.isExecuting(run.id)).toBe(false);
    expect(paused.approvals).toEqual([expect.objectContaining({ callSeq: 2, tool: "pay", input: { to: "acme", amount: 120 }, expiresAt: null })]);
    expect(seen).toEqual([]);
    const requested = ofType(await rt.journal(run.id), "approval.requested");
    expect(requested).toHaveLength(1);
    expect(requested[0]).toMatchObject({ callSeq: 2, data: { tool: "pay", input: { to: "acme", amount: 120 } } });

    // A plain resume does not get past it.
    expect(await codeOf(rt.resume(run.id))).toBe("approval_pending");

    const { decided } = await rt.approve(run.id, { actor: "alice" });
    expect(decided.map((d) => d.callSeq)).toEqual([2]);
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(seen).toEqual([{ to: "acme", amount: 120 }]);
    expect(done.approvals).toEqual([]);
    const journal = await rt.journal(run.id);
    expect(ofType(journal, "approval.decided").map((e) => e.data)).toEqual([
      { tool: "pay", toolCallId: expect.any(String), actor: "alice", decision: "approved", proposed: { to: "acme", amount: 120 }, approved: { to: "acme", amount: 120 }, edited: false, note: null, commandId: expect.stringMatching(/^cmd_/) },
    ]);
    expect(ofType(journal, "call.started").filter((e) => e.data.kind === "tool")).toHaveLength(1);
    expect(journal.filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}:${e.data.reason ?? ""}`)).toEqual([
      "queued>running:",
      "running>pausing:approval_required",
      "pausing>paused:approval_required",
      "paused>running:approvals decided",
      "running>completed:",
    ]);
    // Deciding again is refused with its own code.
    expect(await codeOf(rt.approve(run.id, { actor: "bob" }))).toBe("already_decided");
    expect(await codeOf(rt.approve(run.id, { actor: "bob", callSeq: 2 }))).toBe("already_decided");
  });

  it("a rejection reaches the model as the tool's result, with the note, and the tool never runs", async () => {
    const { pay, seen } = payments();
    const { model, requests } = scripted([{ toolName: "pay", input: { to: "acme", amount: 9000 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })]);
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    await rt.waitFor(run.id, ["paused"]);
    expect(await codeOf(rt.reject(run.id, { actor: "alice", note: "" }))).toBe("invalid_input");
    await rt.reject(run.id, { actor: "alice", note: "too much; ask for an invoice first" });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(seen).toEqual([]);
    expect(requests).toHaveLength(2);
    const refusal = requests[1].at(-1);
    expect(refusal).toMatchObject({ role: "tool", toolName: "pay", isError: true, content: { error: "rejected" } });
    expect(JSON.stringify(refusal)).toContain("too much; ask for an invoice first");
    expect(JSON.stringify(refusal)).toContain("alice");
    const journal = await rt.journal(run.id);
    expect(ofType(journal, "approval.decided")[0].data).toMatchObject({ actor: "alice", decision: "rejected", proposed: { to: "acme", amount: 9000 }, note: "too much; ask for an invoice first" });
    expect(ofType(journal, "call.started").filter((e) => e.data.kind === "tool")).toEqual([]);
    expect(ofType(journal, "call.failed")).toEqual([expect.objectContaining({ callSeq: 2, data: expect.objectContaining({ error: "rejected" }) })]);
  });

  it("edit then approve: the tool sees the edited arguments and the journal keeps proposed, approved and executed", async () => {
    const { pay, seen } = payments();
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 9000 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })]);
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    await rt.waitFor(run.id, ["paused"]);
    expect(await codeOf(rt.approve(run.id, { actor: "alice", input: { to: "acme", amount: -1 } }))).toBe("invalid_input");
    await rt.approve(run.id, { actor: "alice", callSeq: 2, input: { to: "acme", amount: 900 }, note: "a tenth is enough" });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([{ to: "acme", amount: 900 }]);
    const journal = await rt.journal(run.id);
    expect(ofType(journal, "approval.requested")[0].data.input).toEqual({ to: "acme", amount: 9000 });
    expect(ofType(journal, "approval.decided")[0].data).toMatchObject({ proposed: { to: "acme", amount: 9000 }, approved: { to: "acme", amount: 900 }, edited: true, note: "a tenth is enough" });
    expect(ofType(journal, "call.started").find((e) => e.data.kind === "tool")?.data.input).toEqual({ to: "acme", amount: 900 });
  });

  it("asks only when the predicate says so", async () => {
    const { pay, seen } = payments({ needsApproval: (input: { amount: number }) => input.amount > 100 });
    const { model } = scripted([
      { toolName: "pay", input: { to: "small", amount: 5 } },
      { toolName: "pay", input: { to: "large", amount: 500 } },
    ]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })]);
    const rt = h.runtime;
    const run = await rt.start("payer", "pay both");
    const paused = await rt.waitFor(run.id, ["paused", "completed"]);
    expect(paused.status).toBe("paused");
    expect(seen).toEqual([{ to: "small", amount: 5 }]);
    expect(paused.approvals?.map((a) => [a.callSeq, a.input])).toEqual([[3, { to: "large", amount: 500 }]]);
    await rt.approve(run.id, { actor: "alice", callSeq: 3 });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([{ to: "small", amount: 5 }, { to: "large", amount: 500 }]);
  });

  it("two calls of one turn: both are asked at once; approve one, reject the other; the run continues only after both", async () => {
    const { pay, seen } = payments();
    const { model, requests } = scripted([
      { toolName: "pay", input: { to: "alpha", amount: 10 } },
      { toolName: "pay", input: { to: "beta", amount: 20 } },
    ]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })]);
    const rt = h.runtime;
    const run = await rt.start("payer", "pay both");
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused.approvals?.map((a) => [a.callSeq, a.input])).toEqual([
      [2, { to: "alpha", amount: 10 }],
      [3, { to: "beta", amount: 20 }],
    ]);
    expect(ofType(await rt.journal(run.id), "approval.requested").map((e) => e.callSeq)).toEqual([2, 3]);
    expect(await codeOf(rt.approve(run.id, { actor: "alice", input: { to: "x", amount: 1 } }))).toBe("invalid_input");

    const first = await rt.approve(run.id, { actor: "alice", callSeq: 2 });
    expect(first.run.status).toBe("paused");
    // Nothing moves while one call still waits.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await rt.get(run.id)).status).toBe("paused");
    expect(seen).toEqual([]);
    expect(await codeOf(rt.approve(run.id, { actor: "bob", callSeq: 2 }))).toBe("already_decided");
    expect(await codeOf(rt.approve(run.id, { actor: "bob", callSeq: 7 }))).toBe("no_pending_approval");

    const second = await rt.reject(run.id, { actor: "bob", callSeq: 3, note: "beta is not a customer" });
    expect(second.run.status).toBe("running");
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([{ to: "alpha", amount: 10 }]);
    const results = requests[1].filter((m) => m.role === "tool");
    expect(results.map((m) => (m.role === "tool" ? [m.toolName, m.isError ?? false] : []))).toEqual([
      ["pay", false],
      ["pay", true],
    ]);
    const journal = await rt.journal(run.id);
    expect(ofType(journal, "approval.decided").map((e) => [e.callSeq, e.data.actor, e.data.decision])).toEqual([
      [2, "alice", "approved"],
      [3, "bob", "rejected"],
    ]);
    // The calls took the sequence numbers the approvals showed.
    expect(ofType(journal, "call.completed").find((e) => e.data.kind === "tool")?.callSeq).toBe(2);
    expect(ofType(journal, "call.failed").map((e) => e.callSeq)).toEqual([3]);
    expect(journal.filter((e) => e.type === "status" && e.data.to === "running")).toHaveLength(2);
    // Every decision is a command with its outcome, like pause or resume, and shows in the journal.
    const commands = await rt.commands(run.id);
    expect(commands.map((c) => [c.type, c.actor, c.reason, c.payload.callSeq ?? null, c.payload.calls ?? null, c.outcome])).toEqual([
      ["approve", "alice", null, null, null, "refused: invalid_input"],
      ["approve", "alice", null, 2, [2], "applied"],
      ["approve", "bob", null, 2, null, "refused: already_decided"],
      ["approve", "bob", null, 7, null, "refused: no_pending_approval"],
      ["reject", "bob", "beta is not a customer", 3, [3], "applied"],
    ]);
    expect(commands.every((c) => c.appliedAt !== null)).toBe(true);
    const control = ofType(journal, "control");
    expect(control.map((e) => [e.data.command, e.data.commandId, e.data.outcome])).toEqual(commands.map((c) => [c.type, c.id, c.outcome]));
    expect(ofType(journal, "approval.decided").map((e) => e.data.commandId)).toEqual([commands[1].id, commands[4].id]);
  });

  it("approved from a second runtime on its own connection to the store (a real process: test/cli/approve-cli): the worker runs the call exactly once", async () => {
    const { pay, seen } = payments();
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })], { workerPollMs: 20 });
    const worker = h.runtime;
    worker.startWorker();
    const run = await worker.start("payer", "pay acme");
    await worker.waitFor(run.id, ["paused"]);
    const elsewhere = h.open({ worker: false });
    const { run: decided } = await elsewhere.approve(run.id, { actor: "carol" });
    expect(decided.status).toBe("running");
    expect(elsewhere.isExecuting(run.id)).toBe(false);
    expect((await elsewhere.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 })).status).toBe("completed");
    expect(seen).toEqual([{ to: "acme", amount: 120 }]);
    expect(ofType(await elsewhere.journal(run.id), "approval.decided")[0].data.actor).toBe("carol");
  });

  it("an AI SDK tool's own needsApproval is honoured", async () => {
    const seen: unknown[] = [];
    const publish = fromAiSdkTool(
      "publish",
      aiTool({
        description: "Publish a post",
        inputSchema: z.object({ title: z.string() }),
        needsApproval: async ({ title }: { title: string }) => !title.startsWith("draft"),
        execute: async (input: { title: string }) => {
          seen.push(input);
          return { published: input.title };
        },
      }),
    );
    const { model, requests } = scripted([
      { toolName: "publish", input: { title: "draft: notes" } },
      { toolName: "publish", input: { title: "Launch" } },
      { toolName: "publish", input: { title: "Teaser" } },
    ]);
    h = harness([toolLoopAgent({ name: "publisher", tools: [publish], model })], { workerPollMs: 20 });
    const rt = h.runtime;
    rt.startWorker();
    const run = await rt.start("publisher", "publish");
    const paused = await rt.waitFor(run.id, ["paused", "completed"]);
    expect(paused.statusReason).toBe("approval_required");
    expect(paused.approvals?.map((a) => [a.callSeq, a.input])).toEqual([
      [3, { title: "Launch" }],
      [4, { title: "Teaser" }],
    ]);
    expect(seen).toEqual([{ title: "draft: notes" }]);
    // Decided from another process on the same store: edited, and rejected with a note.
    const elsewhere = h.open({ worker: false });
    await elsewhere.approve(run.id, { actor: "alice", callSeq: 3, input: { title: "Launch day" } });
    await elsewhere.reject(run.id, { actor: "alice", callSeq: 4, note: "no teasers" });
    expect((await elsewhere.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 })).status).toBe("completed");
    expect(seen).toEqual([{ title: "draft: notes" }, { title: "Launch day" }]);
    expect(JSON.stringify(requests[1].at(-1))).toContain("no teasers");
  });

  it("deciding with nothing pending is refused with no_pending_approval", async () => {
    let release: (() => void) | undefined;
    const slow = tool({
      name: "slow",
      description: "Takes a while",
      input: z.object({}),
      execute: () => new Promise<string>((resolve) => (release = () => resolve("ok"))),
    });
    const { model } = scripted([{ toolName: "slow", input: {} }]);
    h = harness([toolLoopAgent({ name: "slowpoke", tools: [slow], model })]);
    const rt = h.runtime;
    const run = await rt.start("slowpoke", "go");
    await waitUntil(() => release !== undefined, { what: "the tool to start" });
    expect(await codeOf(rt.approve(run.id, { actor: "alice" }))).toBe("no_pending_approval");
    await rt.pause(run.id);
    release!();
    expect((await rt.waitFor(run.id, ["paused"])).statusReason).toBe("paused by local");
    expect(await codeOf(rt.reject(run.id, { actor: "alice", note: "no" }))).toBe("no_pending_approval");
    expect(await codeOf(rt.approve(run.id, { actor: "alice", callSeq: 2 }))).toBe("no_pending_approval");
    expect(await codeOf(rt.approve("run_missing", { actor: "alice" }))).toBe("run_not_found");
  });
});

describe("approval in a step machine", () => {
  it("a defineAgent step that calls a tool needing approval pauses the same way; its calls are asked one at a time", async () => {
    const { pay, seen } = payments({ needsApproval: (input: { amount: number }) => input.amount >= 100 });
    h = harness([
      sequenceAgent({
        name: "steps",
        tools: [pay],
        steps: [
          { tool: "pay", input: { to: "a", amount: 100 } },
          { tool: "pay", input: { to: "b", amount: 1 } },
          { tool: "pay", input: { to: "c", amount: 300 } },
        ],
      }),
    ]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    expect((await rt.waitFor(run.id, ["paused"])).approvals?.map((a) => [a.callSeq, a.input])).toEqual([[1, { to: "a", amount: 100 }]]);
    await rt.approve(run.id, { actor: "alice" });
    const second = await rt.waitFor(run.id, (r) => r.status === "paused" && r.step === 2);
    expect(second.approvals?.map((a) => [a.callSeq, a.input])).toEqual([[3, { to: "c", amount: 300 }]]);
    await rt.reject(run.id, { actor: "alice", note: "not c" });
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done.output).toBe(3);
    expect(seen.map((p) => p.to)).toEqual(["a", "b"]);
  });
});

describe("approval of what the person saw", () => {
  it("a state edited while the call waits does not change the approved arguments: the tool gets what was approved", async () => {
    const { pay, seen } = payments();
    h = harness([
      defineAgent({
        name: "vars-payer",
        version: "1",
        tools: [pay],
        init: () => ({ messages: [], vars: { to: "acme", paid: false } }),
        next: (state): Action => (state.vars.paid ? { type: "done", output: "paid" } : { type: "tool", toolCallId: "pay-1", toolName: "pay", input: { to: String(state.vars.to), amount: 120 } }),
        apply: (state) => {
          state.vars = { ...state.vars, paid: true };
        },
      }),
    ]);
    const rt = h.runtime;
    const run = await rt.start("vars-payer", null);
    const waiting = await rt.waitFor(run.id, ["paused"]);
    expect(waiting.approvals?.map((a) => a.input)).toEqual([{ to: "acme", amount: 120 }]);
    // Someone edits the state the call's arguments come from, then the approver approves what the dashboard shows.
    await rt.editState(run.id, { patch: { vars: { to: "mallory" } }, actor: "bob" });
    await rt.approve(run.id, { actor: "alice" });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([{ to: "acme", amount: 120 }]);
    const started = ofType(await rt.journal(run.id), "call.started").find((e) => e.data.name === "pay");
    expect(started?.data.input).toEqual({ to: "acme", amount: 120 });
  });
});

describe("approval and the stale check", () => {
  it("a decision that comes after the snapshot went stale leaves the run paused, decided; a forced resume runs the call once", async () => {
    const clock = new TestClock();
    const { pay, seen } = payments();
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model, staleAfterMs: 60_000 })], { clock });
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    await rt.waitFor(run.id, ["paused"]);
    clock.advance(61_000);
    const { run: after } = await rt.approve(run.id, { actor: "alice" });
    expect(after.status).toBe("paused");
    expect(after.statusReason).toMatch(/^stale_snapshot: the snapshot is 61 s old/);
    expect(after.approvals?.[0].decision).toMatchObject({ decision: "approved", actor: "alice" });
    expect(await codeOf(rt.resume(run.id))).toBe("stale_snapshot");
    await rt.resume(run.id, { force: true, actor: "alice" });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([{ to: "acme", amount: 120 }]);
  });
});

describe("approval deadlines", () => {
  it("a deadline that passes applies the default (reject), journaled, and the run goes on", async () => {
    const clock = new TestClock();
    const { pay, seen } = payments({ needsApproval: true, approvalTtlMs: 60_000 });
    const { model, requests } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })], { clock });
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused.approvals?.[0]).toMatchObject({ onTimeout: "reject", expiresAt: paused.approvals![0].requestedAt + 60_000 });
    expect(await rt.expireApprovals()).toEqual([]);
    clock.advance(60_001);
    const changed = await rt.expireApprovals();
    expect(changed.map((r) => r.id)).toEqual([run.id]);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toEqual([]);
    const journal = await rt.journal(run.id);
    expect(ofType(journal, "approval.expired").map((e) => e.data)).toEqual([{ tool: "pay", toolCallId: expect.any(String), ttlMs: 60_000, applied: "reject" }]);
    expect(ofType(journal, "approval.decided")[0].data).toMatchObject({ actor: "deadline", decision: "rejected" });
    expect(JSON.stringify(requests[1].at(-1))).toContain("was not run");
    // The deadline's rejection is a command like a person's.
    const commands = await rt.commands(run.id);
    expect(commands.map((c) => [c.type, c.actor, c.payload.calls, c.outcome])).toEqual([["reject", "deadline", [2], "applied"]]);
    expect(ofType(journal, "approval.decided")[0].data.commandId).toBe(commands[0].id);
  });

  it("a deadline that passes while the run is still pausing is applied once it is paused, and the run goes on", async () => {
    const clock = new TestClock();
    let release!: () => void;
    let slowStarted = false;
    let onSlowStarted!: () => void;
    const slowHasStarted = new Promise<void>((resolve) => (onSlowStarted = resolve));
    // A tool that does not honour its signal: the pause waits for it (pausing).
    const slow = tool({
      name: "slow_report",
      description: "A long report (not abortable)",
      input: z.object({}),
      execute: async () => {
        slowStarted = true;
        onSlowStarted();
        await new Promise<void>((resolve) => (release = resolve));
        return { report: "ok" };
      },
    });
    const { pay, seen } = payments({ needsApproval: true, approvalTtlMs: 1_000, onApprovalTimeout: "reject" });
    const agent = durableAgent({
      name: "both",
      tools: [slow, pay],
      run: async (ctx) => {
        // The report starts first; the payment is asked for while the report is in flight.
        const report = ctx.tool(slow, {});
        await slowHasStarted;
        const payment = ctx.tool(pay, { to: "acme", amount: 5 });
        const [r, p] = await Promise.allSettled([report, payment]);
        return { report: r.status, payment: p.status };
      },
    });
    h = harness([agent], { clock });
    const rt = h.runtime;
    const run = await rt.start("both", null);
    await waitUntil(() => slowStarted, { what: "the slow tool to start" });
    const pausing = await rt.waitFor(run.id, (r) => r.status === "pausing" && (r.approvals?.length ?? 0) === 1);
    expect(pausing.statusReason).toBe("approval_required");

    // The deadline passes while the slow tool still runs: it waits for the pause to finish.
    clock.advance(1_001);
    expect(await rt.expireApprovals()).toEqual([]);
    release();
    await rt.waitFor(run.id, ["paused"]);
    await rt.settled(run.id);
    expect((await rt.expireApprovals()).map((r) => r.id)).toEqual([run.id]);

    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: { report: "fulfilled", payment: "rejected" } });
    expect(seen).toEqual([]);
    expect(ofType(await rt.journal(run.id), "approval.expired")).toHaveLength(1);
  });

  it("a run halted while it waited for approval waits for it again once the halt is lifted: a new worker's rescan finds its deadline", async () => {
    const clock = new TestClock();
    const { pay, seen } = payments({ needsApproval: true, approvalTtlMs: 60_000 });
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })], { clock });
    const first = h.runtime;
    const run = await first.start("payer", "pay acme");
    expect((await first.waitFor(run.id, ["paused"])).statusReason).toBe("approval_required");
    await first.halt({ actor: "ops", reason: "incident" });
    await first.unhalt({ actor: "ops" });
    expect(await first.get(run.id)).toMatchObject({ status: "paused", statusReason: "approval_required" });
    const journal = await first.journal(run.id);
    expect(journal.filter((e) => e.type === "status").at(-1)?.data).toMatchObject({ from: "halted", to: "paused", reason: "halt lifted" });
    await first.close();

    // A worker started after (a deploy) applies the deadline when it passes.
    const worker = h.open({ clock, approvalDeadlines: { checkMs: 20, rescanMs: 50 }, workerPollMs: 20 });
    worker.startWorker();
    // Its first rescans (every 50 ms of real time) find the run's deadline.
    await new Promise((resolve) => setTimeout(resolve, 150));
    clock.advance(60_001);
    const done = await worker.waitFor(run.id, ["completed", "failed"], { timeoutMs: 5_000 });
    expect(done.status).toBe("completed");
    expect(ofType(await worker.journal(run.id), "approval.expired")).toHaveLength(1);
    expect(seen).toEqual([]);
  });

  it("a worker applies deadlines on its own: those it wrote, and those a closed runtime wrote (found by its rescan)", async () => {
    const clock = new TestClock();
    const { pay, seen } = payments({ needsApproval: true, approvalTtlMs: 60_000 });
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    const deadlines = { checkMs: 20, rescanMs: 50 };
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })], { clock, approvalDeadlines: deadlines, workerPollMs: 20 });
    const first = h.runtime;
    first.startWorker();
    const own = await first.start("payer", "pay acme");
    await first.waitFor(own.id, ["paused"]);
    clock.advance(60_001);
    expect((await first.waitFor(own.id, ["completed", "failed"], { timeoutMs: 5_000 })).status).toBe("completed");

    // Paused by a runtime that then closed (in this process, as a process that went away); a worker started later finds the deadline.
    const other = await first.start("payer", "pay acme again");
    await first.waitFor(other.id, ["paused"]);
    await first.close();
    const second = h.open({ clock, approvalDeadlines: deadlines, workerPollMs: 20 });
    second.startWorker();
    clock.advance(60_001);
    expect((await second.waitFor(other.id, ["completed", "failed"], { timeoutMs: 5_000 })).status).toBe("completed");
    expect(seen).toEqual([]);
    expect((await second.journal(other.id)).filter((e) => e.type === "approval.expired")).toHaveLength(1);
  });

  it("onApprovalTimeout wait: the expiry is journaled once and the call keeps waiting for a person", async () => {
    const clock = new TestClock();
    const { pay, seen } = payments({ needsApproval: true, approvalTtlMs: 1_000, onApprovalTimeout: "wait" });
    const { model } = scripted([{ toolName: "pay", input: { to: "acme", amount: 120 } }]);
    h = harness([toolLoopAgent({ name: "payer", tools: [pay], model })], { clock });
    const rt = h.runtime;
    const run = await rt.start("payer", "pay acme");
    await rt.waitFor(run.id, ["paused"]);
    clock.advance(1_001);
    await rt.expireApprovals();
    await rt.expireApprovals();
    const still = await rt.get(run.id);
    expect(still.status).toBe("paused");
    expect(still.statusReason).toBe("approval_required");
    expect(ofType(await rt.journal(run.id), "approval.expired").map((e) => e.data.applied)).toEqual(["wait"]);
    await rt.approve(run.id, { actor: "alice" });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen).toHaveLength(1);
  });

  it("an approved call aborted by a pause runs again under the idempotency key it was approved at", async () => {
    const keys: string[] = [];
    let release!: () => void;
    const slow = tool({
      name: "transfer",
      description: "Move money (honours its signal)",
      input: z.object({ amount: z.number() }),
      needsApproval: true,
      abortable: true,
      execute: async (_input, { idempotencyKey, signal }) => {
        keys.push(idempotencyKey);
        if (keys.length === 1) await new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
        await new Promise<void>((resolve) => (release = resolve));
        return { moved: true };
      },
    });
    const { model } = scripted([{ toolName: "transfer", input: { amount: 5 } }]);
    h = harness([toolLoopAgent({ name: "mover", tools: [slow], model })]);
    const rt = h.runtime;
    const run = await rt.start("mover", "move it");
    const asked = await rt.waitFor(run.id, ["paused"]);
    const callSeq = asked.approvals![0].callSeq;
    await rt.approve(run.id, { actor: "alice" });
    await rt.resume(run.id, { actor: "alice" });
    await waitUntil(() => keys.length === 1, { what: "the approved call to start" });
    await rt.pause(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["paused"]);
    await rt.resume(run.id, { actor: "alice" });
    await waitUntil(() => keys.length === 2, { what: "the approved call to run again" });
    release();
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(keys).toEqual([`${run.id}:${callSeq}`, `${run.id}:${callSeq}`]);
  });
});
