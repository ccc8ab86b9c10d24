import { afterEach, describe, expect, it } from "vitest";
import { durableAgent } from "../agents/durable-agent.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * An agent that creates a draft (a step that declares how to revalidate it), then waits in an
 * abortable step until released. `world` is what the draft service would say.
 */
function drafting() {
  const world = { drafts: new Set<string>(), created: 0, asked: [] as string[], holds: 0 };
  let release: (() => void) | undefined;
  const agent = durableAgent({
    name: "drafter",
    run: async (ctx) => {
      const draft = await ctx.step(
        "create-draft",
        () => {
          world.created++;
          world.drafts.add("d-1");
          return { id: "d-1" };
        },
        {
          revalidate: (result) => {
            world.asked.push(result.id);
            return world.drafts.has(result.id) ? true : `draft ${result.id} was deleted`;
          },
        },
      );
      await ctx.step(
        "hold",
        ({ signal }) =>
          new Promise<null>((resolve, reject) => {
            world.holds++;
            release = () => resolve(null);
            signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
          }),
        { abortable: true },
      );
      return draft.id;
    },
  });
  return { agent, world, release: () => release?.() };
}

describe("a step's revalidate on resume (async-function agents)", () => {
  it("asks each replayed step once per resume; a drift pauses the run as stale before any later call; force goes on", async () => {
    const d = drafting();
    h = harness([d.agent]);
    const run = await h.runtime.start("drafter", null);
    await waitUntil(() => d.world.holds === 1, { what: "the hold step" });
    // The first execution made the step live: nothing to revalidate.
    expect(d.world.asked).toEqual([]);

    // Resumed while the draft still exists: asked once, and the run goes on.
    await h.runtime.pause(run.id, { wait: true });
    await h.runtime.resume(run.id);
    await waitUntil(() => d.world.holds === 2, { what: "the hold step again" });
    expect(d.world.asked).toEqual(["d-1"]);

    // The draft is deleted while the run is paused: the resume stops at the replayed step.
    await h.runtime.pause(run.id, { wait: true });
    d.world.drafts.clear();
    await h.runtime.resume(run.id);
    const stale = await h.runtime.waitFor(run.id, ["paused"]);
    expect(stale.statusReason).toBe("stale_snapshot: step create-draft (gate 1) drifted: draft d-1 was deleted");
    expect(d.world.asked).toEqual(["d-1", "d-1"]);
    expect(d.world.holds).toBe(2);
    expect(d.world.created).toBe(1);
    const journal = await h.runtime.journal(run.id, { limit: 1000 });
    const pausedAt = journal.findLastIndex((e) => e.type === "status" && e.data.to === "paused");
    const resumedAt = journal.findLastIndex((e) => e.type === "status" && e.data.to === "running");
    expect(journal.slice(resumedAt, pausedAt).filter((e) => e.type === "call.started")).toEqual([]);

    // A person looked and goes on anyway: not asked, the next call is made, the run completes.
    await h.runtime.resume(run.id, { force: true, actor: "alice" });
    await waitUntil(() => d.world.holds === 3, { what: "the hold step after a forced resume" });
    expect(d.world.asked).toEqual(["d-1", "d-1"]);
    d.release();
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: "d-1" });
    expect(d.world.created).toBe(1);
  });

  it("is not asked when the run is cancelled: compensation replays without it", async () => {
    const d = drafting();
    h = harness([d.agent]);
    const run = await h.runtime.start("drafter", null);
    await waitUntil(() => d.world.holds === 1, { what: "the hold step" });
    await h.runtime.pause(run.id, { wait: true });
    d.world.drafts.clear();
    await h.runtime.cancel(run.id);
    expect((await h.runtime.waitFor(run.id, ["cancelled", "failed"])).status).toBe("cancelled");
    expect(d.world.asked).toEqual([]);
  });

  it("durableAgent refuses onStale and vars: its state is the log of its calls, so refreshing it is not offered", () => {
    const options = { name: "refresher", run: async () => null, onStale: (state: unknown) => state } as unknown as Parameters<typeof durableAgent>[0];
    expect(() => durableAgent(options)).toThrow(expect.objectContaining({ code: "invalid_input", message: expect.stringContaining("durableAgent takes no onStale") }));
  });
});
