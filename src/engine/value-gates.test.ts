import { afterEach, describe, expect, it } from "vitest";
import { durableAgent } from "../agents/durable-agent.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("values that ride with the next write (ctx.now, ctx.random, an empty ctx.messages)", () => {
  it("are written once, with the call after them: the snapshot stays whole, and a resume replays them", async () => {
    let holds = 0;
    let release: (() => void) | undefined;
    const seen: unknown[][] = [];
    const agent = durableAgent({
      name: "clockwork",
      run: async (ctx) => {
        const first = [ctx.now(), ctx.random(), await ctx.messages()];
        await ctx.step("a", () => "a");
        const second = [ctx.random(), await ctx.messages()];
        await ctx.step("b", () => "b");
        seen.push([...first, ...second]);
        await ctx.step(
          "hold",
          ({ signal }) =>
            new Promise<null>((resolve, reject) => {
              holds++;
              release = () => resolve(null);
              signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
            }),
          { abortable: true },
        );
        return seen.length;
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("clockwork", null);
    await waitUntil(() => holds === 1, { what: "the hold step" });
    await h.runtime.pause(run.id, { wait: true });
    await h.runtime.resume(run.id);
    await waitUntil(() => holds === 2, { what: "the hold step after the resume" });
    release!();
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: 2 });
    // The replay saw exactly the values the first execution took.
    expect(seen[1]).toEqual(seen[0]);
    const journal = await h.runtime.journal(run.id, { limit: 1000 });
    expect(journal.filter((e) => e.type === "call.started").map((e) => [e.callSeq, e.data.name])).toEqual([
      [4, "a"],
      [7, "b"],
      [8, "hold"],
      [8, "hold"],
    ]);
  });
});
