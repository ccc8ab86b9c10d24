import { afterEach, describe, expect, it } from "vitest";
import { SimulatedModel } from "../models/simulated-model.js";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { defineAgent } from "./agent.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("cancel preview of a run that has ended", () => {
  it("offers nothing to undo and says a cancel would not apply; the cancel is refused", async () => {
    const ledger = new Ledger();
    h = harness([sequenceAgent({ name: "publisher", tools: [effectTool({ name: "publish", ledger, compensable: true })], steps: [{ tool: "publish", input: { id: "a" } }] })]);
    const run = await h.runtime.start("publisher", null);
    await h.runtime.waitFor(run.id, ["completed"]);
    expect(await h.runtime.cancelPreview(run.id)).toEqual({ runId: run.id, status: "completed", cancellable: false, compensations: [], resources: [], uncertain: [], forks: [], inherited: [] });
    await expect(h.runtime.cancel(run.id)).rejects.toMatchObject({ code: "illegal_transition" });
    expect(ledger.compensations).toEqual([]);
  });
});

describe("cancel preview of a run in a model call", () => {
  it("lists the effects to undo but not the model call as uncertain, as the report will not", async () => {
    const ledger = new Ledger();
    const publish = effectTool({ name: "publish", ledger, compensable: true });
    const agent = defineAgent({
      name: "writer",
      version: "1",
      tools: [publish],
      model: new SimulatedModel({ tokensPerSecond: 5 }),
      init: () => ({ messages: [{ role: "user", content: "write" }], vars: { step: 0 } }),
      next: (state) => {
        const step = Number(state.vars.step);
        if (step === 0) return { type: "tool", toolCallId: "p", toolName: "publish", input: { id: "a" } };
        return step === 1 ? { type: "model", request: { messages: state.messages, tools: [] } } : { type: "done", output: step };
      },
      apply: (state) => {
        state.vars = { step: Number(state.vars.step) + 1 };
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("writer", null);
    await waitUntil(async () => (await h!.runtime.get(run.id)).inflight?.kind === "model", { what: "the model call" });
    const preview = await h.runtime.cancelPreview(run.id);
    expect(preview.compensations.map((c) => c.tool)).toEqual(["publish"]);
    expect(preview.uncertain).toEqual([]);
    await h.runtime.cancel(run.id, { actor: "alice" });
    const cancelled = await h.runtime.waitFor(run.id, ["cancelled"]);
    expect(cancelled.report).toMatchObject({ compensated: [{ tool: "publish" }], uncertain: [] });
  });
});
