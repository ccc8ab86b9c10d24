import { describe, expect, it } from "vitest";
import { newRunRecord } from "../../src/engine/run-record.js";
import type { RunRecord } from "../../src/engine/store.js";
import { waitingForMs, waitingOn } from "../../src/server/run-view.js";

function run(patch: Partial<RunRecord>): RunRecord {
  const base = newRunRecord({ id: "run_1", agent: "a", agentVersion: "1", owner: "o", status: "running", input: null, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1_000 });
  return { ...base, ...patch };
}

describe("what a run waits on, in every answer", () => {
  it("gives waitingFor and waitingForMs together: both set while a stopping run waits on a call, both null otherwise", () => {
    const inflight = { callSeq: 3, kind: "tool" as const, name: "publish", action: null, startedAt: 2_000 };
    const pausing = run({ status: "pausing", inflight, waitingFor: null });
    expect(waitingOn(pausing)).toEqual({ kind: "tool", name: "publish", callSeq: 3, since: 2_000 });
    expect(waitingForMs(pausing, 3_094)).toBe(1_094);
    const recorded = run({ status: "pausing", inflight, waitingFor: { kind: "tool", name: "publish", callSeq: 3, since: 2_500 } });
    expect([waitingOn(recorded)?.since, waitingForMs(recorded, 3_000)]).toEqual([2_500, 500]);
    for (const quiet of [run({ status: "running", inflight }), run({ status: "paused" })]) expect([waitingOn(quiet), waitingForMs(quiet, 9_999)]).toEqual([null, null]);
  });
});
