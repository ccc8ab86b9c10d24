import { describe, expect, it } from "vitest";
import type { JournalEntry, JournalType, JsonObject } from "../api/types.js";
import { buildTimeline, callStatus } from "./timeline-model.js";

let seq = 0;
function entry(type: JournalType, data: JsonObject, callSeq?: number): JournalEntry {
  seq += 1;
  return { runId: "run_1", seq, type, at: 1000 + seq, data, ...(callSeq === undefined ? {} : { callSeq }) };
}

describe("buildTimeline", () => {
  it("groups a call's entries by callSeq and counts committed steps", () => {
    seq = 0;
    const timeline = buildTimeline([
      entry("run.created", { agent: "a", owner: "olivia" }),
      entry("status", { from: "queued", to: "running" }),
      entry("call.started", { kind: "model", name: "sim", messages: 2, tools: 3 }, 1),
      entry("call.completed", { kind: "model", name: "sim", durationMs: 40, usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, costUsd: 0.001 }, resultInMessage: 2 }, 1),
      entry("call.started", { kind: "tool", name: "search", input: { q: "x" } }, 2),
      entry("call.failed", { kind: "tool", name: "search", error: "tool_error", message: "boom", resultInMessage: 3 }, 2),
      entry("call.started", { kind: "model", name: "sim" }, 3),
      entry("call.failed", { kind: "model", name: "sim", error: "model_error", message: "down", usage: { inputTokens: 1, outputTokens: 0, cachedInputTokens: 0, costUsd: 0 } }, 3),
    ]);
    const calls = [...timeline.calls.values()];
    expect(calls.map((c) => [c.callSeq, c.kind, callStatus(c), c.step])).toEqual([
      [1, "model", "completed", 1],
      [2, "tool", "failed", 2],
      // A failed model call commits no snapshot, so it is no step to fork from.
      [3, "model", "failed", undefined],
    ]);
    expect(calls[0].request).toEqual({ messages: 2, tools: 3 });
    expect(calls[0].usage?.costUsd).toBe(0.001);
    expect(calls[1].input).toEqual({ q: "x" });
    expect(calls[1].error).toEqual({ code: "tool_error", message: "boom" });
    expect(timeline.current).toBeUndefined();
  });

  it("shows approvals as markers and in the audit trail; a rejected call, which never started, still counts its step", () => {
    seq = 0;
    const timeline = buildTimeline([
      entry("run.created", { agent: "a", owner: "olivia" }),
      entry("call.started", { kind: "model", name: "sim", messages: 2, tools: 1 }, 1),
      entry("call.completed", { kind: "model", name: "sim", resultInMessage: 2 }, 1),
      entry("approval.requested", { tool: "pay", toolCallId: "c1", input: { amount: 5 }, expiresAt: null, onTimeout: "reject" }, 2),
      entry("approval.requested", { tool: "pay", toolCallId: "c2", input: { amount: 9 }, expiresAt: null, onTimeout: "reject" }, 3),
      entry("approval.decided", { tool: "pay", actor: "alice", decision: "approved", proposed: { amount: 5 }, approved: { amount: 4 }, edited: true, note: null }, 2),
      entry("approval.decided", { tool: "pay", actor: "bob", decision: "rejected", proposed: { amount: 9 }, note: "no" }, 3),
      entry("call.started", { kind: "tool", name: "pay", input: { amount: 4 } }, 2),
      entry("call.completed", { kind: "tool", name: "pay", resultInMessage: 3 }, 2),
      entry("call.failed", { kind: "tool", name: "pay", error: "rejected", message: "rejected", resultInMessage: 4 }, 3),
    ]);
    const calls = [...timeline.calls.values()];
    expect(calls.map((c) => [c.callSeq, callStatus(c), c.step, c.input ?? null])).toEqual([
      [1, "completed", 1, null],
      [2, "completed", 2, { amount: 4 }],
      [3, "failed", 3, { amount: 9 }],
    ]);
    expect(timeline.audit.map((a) => [a.actor, a.action, a.reason, a.detail])).toEqual([
      ["alice", "approve", null, "call #2, arguments edited"],
      ["bob", "reject", "no", "call #3"],
    ]);
    const markers = timeline.items.flatMap((i) => (i.type === "marker" && i.marker.kind === "approval" ? [i.marker.title] : []));
    expect(markers).toEqual(["pay (call #2) needs approval", "pay (call #3) needs approval", "alice approved pay (call #2)", "bob rejected pay (call #3)"]);
  });

  it("starts counting steps where a fork was taken", () => {
    seq = 0;
    const timeline = buildTimeline([
      entry("run.created", { agent: "a", owner: "o", forkedFrom: "run_0", fromStep: 4 }),
      entry("call.started", { kind: "tool", name: "t", input: {} }, 9),
      entry("call.completed", { kind: "tool", name: "t", result: { ok: true } }, 9),
    ]);
    expect(timeline.calls.get(9)?.step).toBe(5);
    expect(timeline.calls.get(9)?.result).toEqual({ ok: true });
    expect(timeline.items[0]).toMatchObject({ type: "marker", marker: { title: "Forked from run_0 at step 4" } });
  });

  it("shows the call in flight, and what compensation did to each effect", () => {
    seq = 0;
    const entries = [
      entry("call.started", { kind: "tool", name: "write_draft", input: {} }, 1),
      entry("call.completed", { kind: "tool", name: "write_draft", resultInMessage: 3 }, 1),
      entry("call.started", { kind: "tool", name: "publish", input: {} }, 2),
      entry("call.completed", { kind: "tool", name: "publish", resultInMessage: 4 }, 2),
      entry("call.started", { kind: "model", name: "sim" }, 3),
    ];
    expect(buildTimeline(entries).current?.callSeq).toBe(3);
    const after = buildTimeline([
      ...entries,
      entry("call.aborted", { kind: "model", name: "sim", reason: "cancel", durationMs: 5 }, 3),
      entry("compensation.started", { tool: "publish", attempt: 1 }, 2),
      entry("compensation.succeeded", { tool: "publish", attempts: 1 }, 2),
      entry("compensation.started", { tool: "write_draft", attempt: 1 }, 1),
      entry("compensation.failed", { tool: "write_draft", attempt: 1, error: "disk full", final: false }, 1),
    ]);
    expect(after.current).toBeUndefined();
    expect(callStatus(after.calls.get(3)!)).toBe("aborted");
    expect(callStatus(after.calls.get(2)!)).toBe("compensated");
    expect(callStatus(after.calls.get(1)!)).toBe("compensating");
    expect(after.calls.get(1)?.compensation).toMatchObject({ retrying: true, error: "disk full" });
    const final = buildTimeline([...entries, entry("compensation.failed", { tool: "write_draft", attempts: 3, error: "disk full", final: true }, 1)]);
    expect(callStatus(final.calls.get(1)!)).toBe("compensation_failed");
  });

  it("keeps the audit trail of control commands and edits, and when a requested one took effect", () => {
    seq = 0;
    const timeline = buildTimeline([
      entry("control", { command: "pause", actor: "olivia", reason: "checking sources", outcome: "requested", mode: "immediate" }),
      entry("status", { from: "running", to: "pausing", reason: "checking sources" }),
      entry("status", { from: "pausing", to: "paused", reason: "checking sources" }),
      entry("state.message_added", { actor: "olivia", content: "use primary sources", index: 7 }),
      entry("state.patched", { actor: "olivia", patch: { vars: { focus: "x" } } }),
      entry("control", { command: "resume", actor: "olivia", reason: null, outcome: "applied" }),
      entry("control", { command: "resume", actor: "victor", reason: null, outcome: "refused: illegal_transition" }),
    ]);
    expect(timeline.audit.map((a) => [a.action, a.actor, a.outcome])).toEqual([
      ["pause", "olivia", "requested"],
      ["add message", "olivia", "applied"],
      ["edit state", "olivia", "applied"],
      ["resume", "olivia", "applied"],
      ["resume", "victor", "refused: illegal_transition"],
    ]);
    expect(timeline.audit[0]).toMatchObject({ reason: "checking sources", detail: "mode immediate", appliedAt: 1003 });
    expect(timeline.items.filter((i) => i.type === "marker").map((i) => (i.type === "marker" ? i.marker.title : ""))).toEqual(["Pausing", "Paused", "olivia added a message", "olivia edited the state"]);
  });
});
