import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, TestClock, waitUntil, type Harness } from "../testing/index.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("a pause of a run whose worker's lease ran out", () => {
  it("pauses at once and fences the slow worker: its late outcome is refused, nothing lands after paused", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    const slow = tool({
      name: "slow",
      description: "A call that outlives its worker's lease",
      input: z.object({}),
      execute: async () => {
        started++;
        await held;
        return "late";
      },
    });
    const agent = toolLoopAgent({ name: "slowpoke", tools: [slow], model: "simulated:sim-1?tps=Infinity" });
    h = harness([agent], { leaseMs: 60_000 });
    const run = await h.runtime.start("slowpoke", "call slow");
    await waitUntil(() => started === 1, { what: "the slow call" });
    // Another process, its clock past the lease: no worker holds the run, so it is paused at once.
    const other = h.open({ worker: false, clock: new TestClock(Date.now() + 600_000) });
    const paused = await other.pause(run.id, { actor: "alice" });
    expect(paused.status).toBe("paused");
    const before = await other.get(run.id);
    release();
    await h.runtime.settled(run.id);
    const journal = await other.journal(run.id, { limit: 10_000 });
    const pausedAt = journal.findIndex((e) => e.type === "status" && e.data.to === "paused");
    expect(journal.slice(pausedAt + 1)).toEqual([]);
    expect(await other.get(run.id)).toMatchObject({ status: "paused", step: before.step, epoch: before.epoch });
  });
});
