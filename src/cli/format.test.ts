import { describe, expect, it } from "vitest";
import type { RunView } from "../server/api-types.js";
import type { JournalEntry } from "../engine/store.js";
import { describeEntry, nextSteps } from "./format.js";

const view = (status: RunView["status"]) => ({ id: "run_1", status, approvals: [], statusReason: null, inflight: null }) as unknown as RunView;

describe("nextSteps", () => {
  it("offers only commands the run's status accepts: a queued run cannot be paused yet", () => {
    expect(nextSteps(view("queued"))).toBe("tether cancel run_1 · tether attach run_1");
    expect(nextSteps(view("running"))).toBe("tether pause run_1 · tether cancel run_1 · tether attach run_1");
    expect(nextSteps(view("paused"))).toBe("tether resume run_1 [--message <text>] · tether cancel run_1");
    expect(nextSteps(view("completed"))).toBeUndefined();
  });
});

describe("describeEntry for recovery entries", () => {
  const recovery = (data: Record<string, unknown>) => describeEntry({ runId: "run_1", seq: 5, type: "recovery", at: 0, data } as unknown as JournalEntry);

  it("says who took the run over from whom and why, and what became of the call in flight, in words", () => {
    expect(recovery({ previousWorker: "worker_a", worker: "worker_b", status: "running" })).toBe("recovery: taken over by worker worker_b from worker_a (its lease ended); the run was running");
    expect(recovery({ previousWorker: "worker_a", worker: "worker_b", status: "cancelling", holderGone: true })).toBe(
      "recovery: taken over by worker worker_b from worker_a (its process is gone); the run was cancelling",
    );
    expect(recovery({ decision: "abandon", name: "simulated:sim-1" })).toBe("recovery: simulated:sim-1 was in flight when its worker stopped: dropped unfinished, and made again if the run goes on");
    expect(recovery({ decision: "uncertain", name: "charge" })).toBe("recovery: charge was in flight when its worker stopped: it may or may not have happened, a person decides");
  });

  it("keeps any other shape as key=value", () => {
    expect(recovery({ problem: "nondeterministic_replay", journaled: { kind: "tool" } })).toBe('recovery: problem=nondeterministic_replay journaled={"kind":"tool"}');
  });
});
