import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { tool } from "../engine/tool.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { harness, type Harness } from "../testing/index.js";
import { toolLoopAgent } from "./tool-loop-agent.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const lookup = tool({ name: "lookup", description: "Look up", input: z.object({ q: z.string() }), execute: ({ q }) => ({ found: q }) });

describe("toolLoopAgent's turn limit", () => {
  it("stops after maxTurns model turns, counted from the conversation, and keeps nothing in the user's vars", async () => {
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn }) => ({ text: `turn ${turn}`, toolCalls: [{ toolName: "lookup", input: { q: `q${turn}` } }] }),
    });
    const agent = toolLoopAgent({ name: "looper", model, tools: [lookup], maxTurns: 3, vars: z.object({ topic: z.string() }).strict(), initialVars: ({ prompt }) => ({ topic: prompt }) });
    h = harness([agent]);
    const run = await h.runtime.start("looper", "tides");
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: "turn 2" });
    const state = await h.runtime.state(run.id);
    expect(state.messages.filter((m) => m.role === "assistant")).toHaveLength(3);
    expect(state.messages.filter((m) => m.role === "tool")).toHaveLength(3);
    expect(state.vars).toEqual({ topic: "tides" });
  });

  it("a person's patch of vars cannot change the turn limit: the turns come from the conversation", async () => {
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn }) => ({ text: `turn ${turn}`, toolCalls: [{ toolName: "lookup", input: { q: `q${turn}` } }] }),
    });
    // No vars schema: any patch is accepted, including keys a loop might have used for its own counting.
    const agent = toolLoopAgent({ name: "patched", model, tools: [lookup], maxTurns: 4 });
    h = harness([agent]);
    const run = await h.runtime.start("patched", "tides", { budgets: { maxSteps: 4 } });
    const paused = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(paused.status).toBe("paused");
    expect((await h.runtime.state(run.id)).messages.filter((m) => m.role === "assistant")).toHaveLength(2);
    await h.runtime.resume(run.id, { actor: "alice", patch: { vars: { turns: 0, modelTurns: 0, maxTurns: 100 } }, budgets: { maxSteps: 100 } });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: "turn 3" });
    const state = await h.runtime.state(run.id);
    expect(state.messages.filter((m) => m.role === "assistant")).toHaveLength(4);
    expect(state.vars).toEqual({ turns: 0, modelTurns: 0, maxTurns: 100 });
  });
});
