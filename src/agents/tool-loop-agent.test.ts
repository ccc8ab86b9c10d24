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
});
