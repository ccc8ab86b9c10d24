import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, type Harness } from "../testing/index.js";
import type { JournalEntry, RunRecord } from "./store.js";
import { tool } from "./tool.js";
import { findWaitStart, personWaitReasonOf, waitingForPerson, waitStartIn } from "./waiting.js";

type Waitable = Pick<RunRecord, "status" | "statusReason" | "inflight">;
const paused = (statusReason: string | null, inflight: RunRecord["inflight"] = null): Waitable => ({ status: "paused", statusReason, inflight });
const uncertainCall: RunRecord["inflight"] = { callSeq: 4, kind: "tool", name: "publish", action: null, startedAt: 0, uncertain: true };

describe("waitingForPerson", () => {
  it("names the reason of a run paused for a person, with the status reason as written", () => {
    expect(waitingForPerson(paused("budget_steps: 60 of 60 steps"))).toEqual({ reason: "budget_steps", detail: "budget_steps: 60 of 60 steps" });
    expect(waitingForPerson(paused("loop_detected: the same tool call 5 times in a row"))?.reason).toBe("loop_detected");
    for (const code of ["approval_required", "uncertain_effect", "stale_snapshot", "repeated_failures", "nondeterministic_replay", "version_mismatch", "budget_cost", "budget_time"]) {
      expect(waitingForPerson(paused(code))?.reason).toBe(code);
      expect(waitingForPerson(paused(`${code}: details`))?.reason).toBe(code);
    }
  });

  it("a run a person paused, or paused for a failure of its own, does not wait for a person", () => {
    expect(waitingForPerson(paused("paused by alice"))).toBeNull();
    expect(waitingForPerson(paused("let me look at approval_required"))).toBeNull();
    expect(waitingForPerson(paused("budget_"))).toBeNull();
    expect(waitingForPerson(paused(null))).toBeNull();
    expect(waitingForPerson(paused("halt lifted"))).toBeNull();
  });

  it("only paused and halted runs wait: a run still pausing for a budget, or running, does not", () => {
    expect(waitingForPerson({ status: "pausing", statusReason: "budget_steps: 3 of 3 steps", inflight: null })).toBeNull();
    expect(waitingForPerson({ status: "running", statusReason: null, inflight: null })).toBeNull();
    expect(waitingForPerson({ status: "cancelled", statusReason: "budget_steps: 3 of 3 steps", inflight: null })).toBeNull();
    expect(waitingForPerson({ status: "halted", statusReason: "incident 42", inflight: null })).toEqual({ reason: "halted", detail: "incident 42" });
  });

  it("an uncertain call makes a paused run wait for a person whatever its pause was for", () => {
    expect(waitingForPerson(paused("paused by alice", uncertainCall))).toEqual({ reason: "uncertain_effect", detail: "paused by alice" });
  });

  it("reads the code only at the start of the reason", () => {
    expect(personWaitReasonOf("budget_tokens: 100 of 100 tokens used")).toBe("budget_tokens");
    expect(personWaitReasonOf("stale_snapshot:")).toBe("stale_snapshot");
    expect(personWaitReasonOf("stale_snapshot now")).toBeUndefined();
    expect(personWaitReasonOf("model_error: rate limited")).toBeUndefined();
  });
});

function status(seq: number, from: string, to: string, reason?: string): JournalEntry {
  return { runId: "run_1", seq, at: 1000 * seq, type: "status", data: { from, to, ...(reason ? { reason } : {}) } };
}
function note(seq: number): JournalEntry {
  return { runId: "run_1", seq, at: 1000 * seq, type: "control", data: { command: "pause", outcome: "already_holds" } };
}

describe("when the wait began", () => {
  const journal = [status(1, "queued", "running"), status(2, "running", "pausing", "budget_steps"), status(3, "pausing", "paused", "budget_steps"), ...Array.from({ length: 250 }, (_, i) => note(4 + i))];

  it("is the last status entry into the run's status", () => {
    expect(waitStartIn(journal, "paused")?.seq).toBe(3);
    expect(waitStartIn(journal, "halted")).toBeUndefined();
  });

  it("is found reading back from the end a page at a time", async () => {
    const reads: [number, number][] = [];
    const found = await findWaitStart({ status: "paused", journalSeq: 253 }, async (after, limit) => {
      reads.push([after, limit]);
      return journal.filter((e) => e.seq > after).slice(0, limit);
    }, 100);
    expect(found?.seq).toBe(3);
    expect(reads).toEqual([[153, 100], [53, 100], [0, 53]]);
  });
});

describe("waitingForPerson on real runs", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.cleanup();
    h = undefined;
  });

  it("a run paused by its step budget waits for a person since its pause; one paused by a person does not", async () => {
    const search = tool({ name: "search", description: "Search", input: z.object({ query: z.string() }), execute: ({ query }) => ({ hits: [query] }) });
    h = harness([toolLoopAgent({ name: "plain", tools: [search] })]);
    const rt = h.runtime;
    const budgeted = await rt.start("plain", "think", { budgets: { maxSteps: 1 }, model: "simulated:sim-1?tps=Infinity" });
    const stopped = await rt.waitFor(budgeted.id, ["paused"]);
    expect(waitingForPerson(stopped)).toEqual({ reason: "budget_steps", detail: stopped.statusReason });
    const start = await findWaitStart(stopped, (after, limit) => rt.journal(budgeted.id, { after, limit }));
    expect(start).toMatchObject({ type: "status", data: { from: "pausing", to: "paused" } });
    expect(start!.at).toBeLessThanOrEqual(stopped.updatedAt);

    const slow = await rt.start("plain", "think slowly", { model: "simulated:sim-1?tps=50" });
    await rt.waitFor(slow.id, ["running"]);
    await rt.pause(slow.id, { actor: "alice" });
    expect(waitingForPerson(await rt.waitFor(slow.id, ["paused"]))).toBeNull();
  });
});
