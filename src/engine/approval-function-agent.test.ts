import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { durableAgent } from "../agents/durable-agent.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** A payment a person must approve; what it paid and refunded, as the outside world saw it. */
function payTool() {
  const paid: { to: string; amount: number }[] = [];
  const refunded: unknown[] = [];
  const pay = tool({
    name: "pay",
    description: "Send a payment",
    input: z.object({ to: z.string(), amount: z.number() }),
    needsApproval: true,
    execute: (input) => {
      paid.push(input);
      return { paid: input.amount };
    },
    compensate: (input) => {
      refunded.push(input);
    },
  });
  return { pay, paid, refunded };
}

describe("an async-function agent's approved call", () => {
  it("never runs with arguments other than the ones a person was asked about: a call that changed since stops the run (nondeterministic_replay)", async () => {
    const { pay, paid } = payTool();
    // What the function reads from the world outside a gate (a price, a file): it changes
    // between the call that asked for approval and the call from the top after the decision.
    const world = { amount: 5 };
    const agent = durableAgent({ name: "payer", tools: [pay], run: async (ctx) => ctx.tool(pay, { to: "acme", amount: world.amount }) });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("payer", null);
    const asked = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(asked.statusReason).toBe("approval_required");
    expect(asked.approvals?.map((a) => a.input)).toEqual([{ to: "acme", amount: 5 }]);

    world.amount = 5_000;
    await rt.approve(run.id, { actor: "alice" });
    const after = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paid).toEqual([]);
    expect(after).toMatchObject({ status: "paused", statusReason: expect.stringMatching(/^nondeterministic_replay/) });
  });

  it("edited then approved: call.started and the effect a cancel undoes carry the approved arguments, as the tool saw them", async () => {
    const { pay, paid, refunded } = payTool();
    let holding = false;
    const agent = durableAgent({
      name: "payer",
      tools: [pay],
      run: async (ctx) => {
        await ctx.tool(pay, { to: "acme", amount: 120 });
        await ctx.step(
          "hold",
          async ({ signal }) => {
            holding = true;
            await new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
            return null;
          },
          { abortable: true },
        );
        return "done";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("payer", null);
    await rt.waitFor(run.id, ["paused"]);
    await rt.approve(run.id, { actor: "alice", input: { to: "acme", amount: 110 } });
    await waitUntil(() => holding, { what: "the run to reach the hold step" });
    expect(paid).toEqual([{ to: "acme", amount: 110 }]);
    const started = (await rt.journal(run.id)).find((e) => e.type === "call.started" && e.data.name === "pay");
    expect(started?.data.input).toEqual({ to: "acme", amount: 110 });

    await rt.cancel(run.id, { actor: "alice" });
    expect((await rt.waitFor(run.id, ["cancelled"])).report?.compensated.map((c) => c.tool)).toEqual(["pay"]);
    expect(refunded).toEqual([{ to: "acme", amount: 110 }]);
  });
});
