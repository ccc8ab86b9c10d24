import { afterEach, describe, expect, it } from "vitest";
import { durableAgent } from "../agents/durable-agent.js";
import { harness, type Harness } from "../testing/index.js";
import { defineAgent } from "./agent.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("an agent chooses its model per call", () => {
  it("a step machine's model action names the model for that call", async () => {
    const agent = defineAgent({
      name: "two-models",
      version: "1",
      model: "simulated:sim-1?tps=Infinity",
      init: () => ({ messages: [{ role: "user", content: "go" }], vars: {} }),
      next: (state) => {
        const answers = state.messages.filter((m) => m.role === "assistant").length;
        if (answers === 2) return { type: "done", output: answers };
        return { type: "model", request: { messages: state.messages, tools: [] }, ...(answers === 1 ? { model: "simulated:cheap-1?tps=Infinity" } : {}) };
      },
      apply: (state, _action, outcome) => {
        if (outcome.type === "model") state.messages.push({ role: "assistant", content: outcome.result.text });
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("two-models", null);
    expect((await h.runtime.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    const started = (await h.runtime.journal(run.id)).filter((e) => e.type === "call.started").map((e) => e.data.name);
    expect(started).toEqual(["simulated:sim-1", "simulated:cheap-1"]);
  });

  it("an async-function agent passes { model } to ctx.model", async () => {
    const agent = durableAgent({
      name: "fn-two-models",
      model: "simulated:sim-1?tps=Infinity",
      run: async (ctx) => {
        await ctx.model("draft it");
        await ctx.model("check it", { model: "simulated:cheap-1?tps=Infinity" });
        return null;
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("fn-two-models", null);
    expect((await h.runtime.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    const started = (await h.runtime.journal(run.id)).filter((e) => e.type === "call.started").map((e) => e.data.name);
    expect(started).toEqual(["simulated:sim-1", "simulated:cheap-1"]);
  });
});
