import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, type Harness } from "../testing/index.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("fork", () => {
  it("starts a run from step N whose state is the source's at step N, and runs it to completion", async () => {
    const ledger = new Ledger();
    const steps = Array.from({ length: 5 }, (_, i) => ({ tool: "work", input: { id: `item-${i}` } }));
    h = harness([sequenceAgent({ name: "worker", tools: [effectTool({ name: "work", ledger, compensable: true })], steps })]);
    const rt = h.runtime;
    const source = await rt.start("worker", null);
    await rt.waitFor(source.id, ["completed"]);
    const atTwo = await rt.state(source.id, { atStep: 2 });
    expect(atTwo.vars).toEqual({ index: 2 });

    const fork = await rt.fork(source.id, { fromStep: 2, actor: "gus" });
    expect(fork).toMatchObject({ forkedFrom: { runId: source.id, step: 2 }, step: 2, owner: "gus", input: source.input });
    expect(await rt.state(fork.id, { atStep: 2 })).toEqual(atTwo);
    const done = await rt.waitFor(fork.id, ["completed", "failed", "paused"]);
    expect(done).toMatchObject({ status: "completed", output: 5, step: 5 });

    expect(ledger.executions.map((e) => e.input.id)).toEqual(["item-0", "item-1", "item-2", "item-3", "item-4", "item-2", "item-3", "item-4"]);
    expect(ledger.keysOf("work").slice(5)).toEqual([`${fork.id}:1`, `${fork.id}:2`, `${fork.id}:3`]);
    expect((await rt.effects(fork.id)).map((e) => e.callSeq)).toEqual([1, 2, 3]);
    const journal = await rt.journal(fork.id);
    expect(journal[0]).toMatchObject({ type: "run.created", data: { forkedFrom: source.id, fromStep: 2, owner: "gus" } });
    const forkState = await rt.state(fork.id);
    expect(forkState.messages.slice(0, 2)).toEqual(atTwo.messages);
    expect(forkState.messages).toHaveLength(5);
  });

  it("a fork of a model-driven run reaches the same answer as its source", async () => {
    const search = tool({ name: "search", description: "Search", input: z.object({ query: z.string() }), execute: ({ query }) => ({ hits: [query] }) });
    h = harness([toolLoopAgent({ name: "researcher", tools: [search], model: "simulated:sim-1?seed=11&tps=Infinity" })]);
    const rt = h.runtime;
    const source = await rt.start("researcher", "compare caches");
    const finished = await rt.waitFor(source.id, ["completed"]);
    for (const fromStep of [0, 3]) {
      const fork = await rt.fork(source.id, { fromStep });
      const done = await rt.waitFor(fork.id, ["completed", "failed", "paused"]);
      expect(done).toMatchObject({ status: "completed", output: finished.output, step: finished.step });
      expect((await rt.state(fork.id)).messages).toEqual((await rt.state(source.id)).messages);
    }
  });
});
