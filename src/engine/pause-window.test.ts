import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { durableAgent } from "../agents/durable-agent.js";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, type Harness } from "../testing/index.js";
import type { RunUpdate } from "./store.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * A wait that, like many hand-written tools, only listens for the signal's `abort` event: a
 * signal that fired before it began goes unseen, and it runs to its end.
 */
function eventOnlySleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

/**
 * Lands a pause between a call's `started` and its start: once the store has written the
 * `started` of call `name`, and before the executor hears back, the run is paused, so the
 * executor sees the pause (from the command itself) before it would make the call.
 */
function pauseWhenStarted(h: Harness, name: string): { paused: Promise<void> } {
  const update = h.store.update.bind(h.store);
  let done!: () => void;
  const paused = new Promise<void>((resolve) => (done = resolve));
  let fired = false;
  h.store.update = async (u: RunUpdate) => {
    const result = await update(u);
    if (!fired && result.ok && u.journal?.some((e) => e.type === "call.started" && e.data?.name === name)) {
      fired = true;
      await h.runtime.pause(u.runId, { actor: "alice" });
      done();
    }
    return result;
  };
  return { paused };
}

describe("a pause that lands between a call's started and its start", () => {
  it("never starts an abortable tool: call.aborted, re-issued under its key on resume", async () => {
    const began: string[] = [];
    let lookupMs = 30_000;
    const lookup = tool({
      name: "lookup",
      description: "A slow lookup that stops on its signal's abort event",
      input: z.object({ query: z.string() }),
      abortable: true,
      idempotent: true,
      execute: async ({ query }, ctx) => {
        began.push(ctx.idempotencyKey);
        await eventOnlySleep(lookupMs, ctx.signal);
        return { query };
      },
    });
    h = harness([toolLoopAgent({ name: "looker", tools: [lookup], model: "simulated:sim-1?seed=3&tps=Infinity" })]);
    const rt = h.runtime;
    const { paused } = pauseWhenStarted(h, "lookup");
    const run = await rt.start("looker", "look it up");
    await paused;
    // Paused at once, not after the 30 s the tool would have taken.
    const stopped = await rt.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    expect(stopped.inflight).toBeNull();
    expect(began).toEqual([]);
    const journal = await rt.journal(run.id, { limit: 1000 });
    const started = journal.find((e) => e.type === "call.started" && e.data.name === "lookup")!;
    expect(journal.find((e) => e.type === "call.aborted" && e.callSeq === started.callSeq)).toMatchObject({ data: { kind: "tool", name: "lookup", reason: "pause" } });
    expect(journal.filter((e) => e.type === "call.completed" && e.callSeq === started.callSeq)).toEqual([]);

    // The tool now finishes at once: the resumed run makes the call again, under the same key.
    lookupMs = 0;
    await rt.resume(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["completed"], { timeoutMs: 10_000 });
    expect(began[0]).toBe(started.data.key);
  });

  it("never sends a model request: call.aborted with nothing billed", async () => {
    h = harness([toolLoopAgent({ name: "talker", tools: [], model: "simulated:sim-1?seed=3&tps=Infinity" })]);
    const rt = h.runtime;
    const { paused } = pauseWhenStarted(h, "simulated:sim-1");
    const run = await rt.start("talker", "say something");
    await paused;
    const stopped = await rt.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    expect(stopped.usage).toMatchObject({ inputTokens: 0, outputTokens: 0 });
    const journal = await rt.journal(run.id, { limit: 1000 });
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ data: { kind: "model", reason: "pause", streamedChars: 0, estimated: false, usage: { inputTokens: 0, outputTokens: 0 } } });
  });

  it("never starts an abortable step of a function agent", async () => {
    const began: number[] = [];
    const agent = durableAgent({
      name: "stepper",
      run: async (ctx) => {
        await ctx.step("wait", async ({ signal }) => (began.push(Date.now()), await eventOnlySleep(30_000, signal), null), { abortable: true });
        return "done";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const { paused } = pauseWhenStarted(h, "wait");
    const run = await rt.start("stepper", null);
    await paused;
    await rt.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    expect(began).toEqual([]);
    const journal = await rt.journal(run.id, { limit: 1000 });
    expect(journal.filter((e) => e.type === "call.aborted").map((e) => e.data.name)).toEqual(["wait"]);
  });
});
