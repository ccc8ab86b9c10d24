import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, TestClock, waitUntil, type Harness } from "../testing/index.js";
import { loggedResource } from "../testing/logged-resource.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * An idempotent tool whose first call outlives its worker's lease: it waits until `release()`;
 * later calls return at once. `started()` counts the calls begun.
 */
function heldTool() {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let started = 0;
  const slow = tool({
    name: "slow",
    description: "A call that outlives its worker's lease",
    input: z.object({}),
    idempotent: true,
    execute: async () => {
      if (++started === 1) await held;
      return "done";
    },
  });
  return { slow, release, started: () => started };
}

describe("a pause of a run whose worker's lease ran out", () => {
  it("pauses at once and fences the slow worker: its late outcome is refused, nothing lands after paused", async () => {
    const { slow, release, started } = heldTool();
    const agent = toolLoopAgent({ name: "slowpoke", tools: [slow], model: "simulated:sim-1?tps=Infinity" });
    h = harness([agent], { leaseMs: 60_000 });
    const run = await h.runtime.start("slowpoke", "call slow");
    await waitUntil(() => started() === 1, { what: "the slow call" });
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

describe("a worker whose run another worker took over", () => {
  it("lets go of its live resource handles (abandon), never releasing what the record names, which the new holder re-attaches and releases", async () => {
    const { slow, release, started } = heldTool();
    const calls: string[] = [];
    const session = loggedResource("session", calls);
    const agent = toolLoopAgent({ name: "sessions", tools: [slow], resources: [session], model: "simulated:sim-1?tps=Infinity" });
    h = harness([agent], { leaseMs: 60_000 });
    const run = await h.runtime.start("sessions", "call slow");
    await waitUntil(() => started() === 1, { what: "the slow call" });
    // A second worker, its clock past the first one's lease, takes the run over (a new epoch).
    const other = h.open({ clock: new TestClock(Date.now() + 600_000), leaseMs: 60_000 });
    other.startWorker();
    expect((await other.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    // The first worker's call ends late: its write is fenced off, and it lets its handle go.
    release();
    await h.runtime.settled(run.id);
    await waitUntil(() => calls.includes("abandon handle-1"), { what: "the first worker's handle let go" });
    expect(calls[0]).toBe("acquire handle-1");
    expect([...calls].sort()).toEqual(["abandon handle-1", "acquire handle-1", 'reattach handle-2 (was {"session":"handle-1"})', 'release handle-2 {"session":"handle-2"}']);
  });
});
