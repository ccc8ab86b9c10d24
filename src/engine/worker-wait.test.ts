import { describe, expect, it } from "vitest";
import type { Lease, RunRecord } from "./store.js";
import { waitingForWorker, workerWaitText } from "./worker-wait.js";

type Shown = Pick<RunRecord, "status" | "lease" | "runningSince" | "createdAt" | "updatedAt">;
const run = (over: Partial<Shown>): Shown => ({ status: "queued", lease: null, runningSince: null, createdAt: 1_000, updatedAt: 1_000, ...over });
const lease = (until: number): Lease => ({ workerId: "w", epoch: 1, until });

describe("waiting for a worker", () => {
  it("a queued run no worker claimed is reported once it waited 3 s, since it was created", () => {
    expect(waitingForWorker(run({}), 3_999)).toBeNull();
    expect(waitingForWorker(run({}), 4_000)).toEqual({ since: 1_000, forMs: 3_000 });
  });

  it("a resumed run no worker claimed waits since the resume (its running spell began)", () => {
    expect(waitingForWorker(run({ status: "running", runningSince: 10_000, updatedAt: 10_000 }), 15_000)).toEqual({ since: 10_000, forMs: 5_000 });
  });

  it("a run a worker holds is not waiting; one whose lease ran out waits since then", () => {
    expect(waitingForWorker(run({ status: "running", runningSince: 1_000, lease: lease(20_000) }), 19_000)).toBeNull();
    expect(waitingForWorker(run({ status: "cancelling", lease: lease(20_000) }), 25_000)).toEqual({ since: 20_000, forMs: 5_000 });
  });

  it("paused, halted and terminal runs need no worker", () => {
    for (const status of ["paused", "halted", "completed", "failed", "cancelled"] as const) expect(waitingForWorker(run({ status }), 100_000)).toBeNull();
  });

  it("says what to do", () => {
    expect(workerWaitText({ since: 0, forMs: 12_400 })).toMatch(/^waiting for a worker for 12 s: no worker has claimed it \(start one: `tether worker`/);
  });
});
