import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** A loop whose `wait` tool blocks (abortable) until released, so the run can be paused inside it. */
function waiting() {
  let calls = 0;
  let release: (() => void) | undefined;
  const wait = tool({
    name: "wait",
    description: "Waits until released",
    input: z.object({}),
    abortable: true,
    execute: async (_input, { signal }) => {
      calls++;
      await new Promise<void>((resolve, reject) => {
        release = resolve;
        signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      });
      return "released";
    },
  });
  const agent = toolLoopAgent({ name: "waiter", tools: [wait], model: "simulated:sim-1?tps=Infinity", maxTurns: 1 });
  return { agent, calls: () => calls, release: () => release?.() };
}

describe("a resume in a worker process", () => {
  it("claims the run in the resume's own write: the answer already holds this worker's lease, one epoch on", async () => {
    const w = waiting();
    h = harness([w.agent], { leaseMs: 60_000 });
    const run = await h.runtime.start("waiter", "call wait");
    await waitUntil(() => w.calls() === 1, { what: "the first call" });
    await h.runtime.pause(run.id, { wait: true });
    const paused = (await h.store.getRun(run.id))!;
    expect(paused).toMatchObject({ status: "paused", lease: null });

    await h.runtime.resume(run.id);
    const resumed = (await h.store.getRun(run.id))!;
    expect(resumed.status).toBe("running");
    expect(resumed.epoch).toBe(paused.epoch + 1);
    expect(resumed.lease).toMatchObject({ workerId: h.runtime.workerId, epoch: paused.epoch + 1 });
    // One write did both (a resume, then a separate claim, would be two versions on).
    expect(resumed.version).toBe(paused.version + 1);

    await waitUntil(() => w.calls() === 2, { what: "the re-issued call" });
    w.release();
    expect((await h.runtime.waitFor(run.id, ["completed"])).status).toBe("completed");
    // Claimed once, by the resume: no second claim moved the epoch, and no takeover was journaled.
    expect((await h.store.getRun(run.id))!.epoch).toBe(paused.epoch + 1);
    const journal = await h.runtime.journal(run.id, { limit: 1000 });
    expect(journal.filter((e) => e.type === "recovery")).toEqual([]);
  });

  it("a process that does not execute runs resumes without a lease, and a worker claims the run", async () => {
    const w = waiting();
    h = harness([w.agent], { leaseMs: 60_000 });
    const run = await h.runtime.start("waiter", "call wait");
    await waitUntil(() => w.calls() === 1, { what: "the first call" });
    await h.runtime.pause(run.id, { wait: true });
    const paused = (await h.store.getRun(run.id))!;

    const client = h.open({ worker: false });
    const answer = await client.resume(run.id);
    expect(answer.status).toBe("running");

    h.runtime.startWorker();
    await waitUntil(() => w.calls() === 2, { what: "the call re-issued by the worker" });
    const claimed = (await h.store.getRun(run.id))!;
    expect(claimed.lease).toMatchObject({ workerId: h.runtime.workerId, epoch: paused.epoch + 1 });
    w.release();
    expect((await h.runtime.waitFor(run.id, ["completed"])).status).toBe("completed");
  });
});
