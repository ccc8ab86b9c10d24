import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { durableAgent } from "../agents/durable-agent.js";
import { effectTool, harness, Ledger, waitUntil, type Harness } from "../testing/index.js";
import { tempPostgres, type TempPostgres } from "../testing/temp-postgres.js";
import type { SqliteStore } from "../sqlite-store-types.js";
import { TetherError } from "./errors.js";
import type { ModelCallOptions, ModelRequest, ModelStreamPart, TetherModel } from "./model.js";
import { defineAgent, type Action } from "./agent.js";
import type { JournalEntry } from "./store.js";
import { tool, type AnyTool } from "./tool.js";

/**
 * A cancel, halt or pause written by another process reaches the worker a moment later (its
 * watcher's next look, or a notification). A worker that meanwhile meets an error that pauses the
 * run (a model error, a tool gone, too many failures in a row) must not write `pausing` over it:
 * the cancel still compensates, the halt still holds. The worker here never looks on its own
 * (`controlPollMs` of a minute): the error is met before it could have seen the command.
 */

let h: Harness | undefined;
let pg: TempPostgres | undefined;
afterEach(async () => {
  await h?.cleanup();
  await pg?.cleanup();
  h = undefined;
  pg = undefined;
});

/** A model call that stays open until the test fails it, as a provider's 500 would end it. */
class FailOnCueModel implements TetherModel {
  readonly specificationVersion = "tether-model-v1";
  readonly provider = "test";
  readonly modelId = "fail-on-cue";
  calls = 0;
  private fail: ((error: Error) => void) | undefined;

  failNow(): void {
    this.fail?.(new Error("upstream 500"));
  }

  async *stream(_request: ModelRequest, options: ModelCallOptions): AsyncGenerator<ModelStreamPart> {
    this.calls += 1;
    yield { type: "usage", usage: { inputTokens: 10, outputTokens: 0 } };
    await new Promise<void>((_, reject) => {
      this.fail = reject;
      options.signal.addEventListener("abort", () => reject(options.signal.reason), { once: true });
    });
  }
}

/** A tool that waits for the test, then throws what it is given (a server gone, a plain failure). */
function cuedTool(name: string) {
  const cue = { started: 0, throwNow: (_error: Error) => {} };
  const definition = tool({
    name,
    description: "waits for its cue, then fails",
    input: z.object({ id: z.string() }),
    execute: () =>
      new Promise<never>((_, reject) => {
        cue.started += 1;
        cue.throwNow = reject;
      }),
  });
  return { cue, definition };
}

/** Publishes (an effect a cancel undoes), then makes one model call. */
function publishThenThink(ledger: Ledger, model: TetherModel) {
  const publish = effectTool({ name: "publish", ledger, compensable: true });
  return defineAgent({
    name: "publish-then-think",
    version: "1",
    model,
    tools: [publish],
    init: () => ({ messages: [{ role: "user", content: "go" }], vars: { step: 0 } }),
    next: (state): Action => {
      const step = Number(state.vars.step);
      if (step === 0) return { type: "tool", toolCallId: "publish-1", toolName: "publish", input: { id: "a" } };
      if (step === 1) return { type: "model", request: { messages: state.messages, tools: [] } };
      return { type: "done", output: step };
    },
    apply: (state) => {
      state.vars = { step: Number(state.vars.step) + 1 };
    },
  });
}

const statusMoves = (journal: JournalEntry[]) => journal.filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}`);
const journalOf = (id: string) => h!.runtime.journal(id, { limit: 100_000 });

describe("a worker that has not seen a control command yet", () => {
  it("does not pause over a cancel when the model call fails: the run is cancelled and its effect compensated", async () => {
    const ledger = new Ledger();
    const model = new FailOnCueModel();
    h = harness([publishThenThink(ledger, model)], { controlPollMs: 60_000 });
    const run = await h.runtime.start("publish-then-think", null);
    await waitUntil(() => model.calls === 1, { what: "the model call" });
    const control = h.open({ worker: false });
    expect((await control.cancel(run.id, { actor: "alice" })).status).toBe("cancelling");
    model.failNow();

    const final = await h.runtime.waitFor(run.id, ["cancelled", "paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("cancelled");
    expect(ledger.compensationsOf("publish")).toBe(1);
    const journal = await journalOf(run.id);
    expect(statusMoves(journal)).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
    // The failed call is journaled all the same.
    expect(journal.filter((e) => e.type === "call.failed").map((e) => e.data.error)).toEqual(["model_error"]);
  });

  it("does not pause over a cancel on PostgreSQL either, where the command also comes as a notification", async () => {
    const ledger = new Ledger();
    const model = new FailOnCueModel();
    pg = tempPostgres("unseen");
    // The harness takes any store; its type names SQLite's.
    const workerStore = (await pg.open().open()) as unknown as SqliteStore;
    h = harness([publishThenThink(ledger, model)], { store: workerStore, controlPollMs: 60_000 });
    const run = await h.runtime.start("publish-then-think", null);
    await waitUntil(() => model.calls === 1, { what: "the model call" });
    const control = h.open({ worker: false, store: (await pg.open().open()) as unknown as SqliteStore });
    expect((await control.cancel(run.id, { actor: "alice" })).status).toBe("cancelling");
    model.failNow();

    const final = await h.runtime.waitFor(run.id, ["cancelled", "paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("cancelled");
    expect(ledger.compensationsOf("publish")).toBe(1);
    expect(statusMoves(await journalOf(run.id))).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
  });

  it("does not pause over a halt when the model call fails: the run stays halted", async () => {
    const ledger = new Ledger();
    const model = new FailOnCueModel();
    h = harness([publishThenThink(ledger, model)], { controlPollMs: 60_000 });
    const run = await h.runtime.start("publish-then-think", null);
    await waitUntil(() => model.calls === 1, { what: "the model call" });
    const control = h.open({ worker: false });
    await control.halt({ actor: "ops", reason: "incident" });
    expect((await control.get(run.id)).status).toBe("halted");
    model.failNow();

    await waitUntil(async () => (await journalOf(run.id)).some((e) => e.type === "call.failed"), { what: "the failed call's entry" });
    await waitUntil(() => !h!.runtime.isExecuting(run.id), { what: "the worker to let the run go" });
    expect((await h.runtime.get(run.id)).status).toBe("halted");
    expect(statusMoves(await journalOf(run.id))).toEqual(["queued>running", "running>halted"]);
  });

  it("does not pause over a cancel when a tool's server is gone (tool_unavailable)", async () => {
    const ledger = new Ledger();
    const publish = effectTool({ name: "publish", ledger, compensable: true });
    const { cue, definition: fetch } = cuedTool("fetch");
    h = harness([sequenceOf("fetcher", [publish, fetch], ["publish", "fetch"])], { controlPollMs: 60_000 });
    const run = await h.runtime.start("fetcher", null);
    await waitUntil(() => cue.started === 1, { what: "the fetch call" });
    const control = h.open({ worker: false });
    await control.cancel(run.id, { actor: "alice" });
    cue.throwNow(new TetherError("tool_unavailable", "mcp server exited"));

    const final = await h.runtime.waitFor(run.id, ["cancelled", "paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("cancelled");
    expect(ledger.compensationsOf("publish")).toBe(1);
    expect(statusMoves(await journalOf(run.id))).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
  });

  it("does not pause over a cancel when the repeated-failure guard trips", async () => {
    const ledger = new Ledger();
    const publish = effectTool({ name: "publish", ledger, compensable: true });
    const { cue, definition: fetch } = cuedTool("fetch");
    h = harness([sequenceOf("fetcher", [publish, fetch], ["publish", "fetch", "fetch"], { maxConsecutiveFailures: 1 })], { controlPollMs: 60_000 });
    const run = await h.runtime.start("fetcher", null);
    await waitUntil(() => cue.started === 1, { what: "the fetch call" });
    const control = h.open({ worker: false });
    await control.cancel(run.id, { actor: "alice" });
    cue.throwNow(new Error("upstream says no"));

    const final = await h.runtime.waitFor(run.id, ["cancelled", "paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("cancelled");
    expect(ledger.compensationsOf("publish")).toBe(1);
    const journal = await journalOf(run.id);
    expect(statusMoves(journal)).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
    expect(journal.filter((e) => e.type === "call.failed")).toHaveLength(1);
    expect(journal.filter((e) => e.type === "budget.tripped")).toEqual([]);
  });

  it("does not pause over a cancel when an async-function agent's model call fails", async () => {
    const ledger = new Ledger();
    const model = new FailOnCueModel();
    const publish = effectTool({ name: "publish", ledger, compensable: true });
    const agent = durableAgent({
      name: "fn-publisher",
      model,
      tools: [publish],
      run: async (ctx) => {
        await ctx.tool("publish", { id: "a" });
        return (await ctx.model("summarise")).text;
      },
    });
    h = harness([agent], { controlPollMs: 60_000 });
    const run = await h.runtime.start("fn-publisher", null);
    await waitUntil(() => model.calls === 1, { what: "the model call" });
    const control = h.open({ worker: false });
    await control.cancel(run.id, { actor: "alice" });
    model.failNow();

    const final = await h.runtime.waitFor(run.id, ["cancelled", "paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("cancelled");
    expect(ledger.compensationsOf("publish")).toBe(1);
    expect(statusMoves(await journalOf(run.id))).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
  });

  it("still pauses for the error when no command came", async () => {
    const ledger = new Ledger();
    const model = new FailOnCueModel();
    h = harness([publishThenThink(ledger, model)], { controlPollMs: 60_000 });
    const run = await h.runtime.start("publish-then-think", null);
    await waitUntil(() => model.calls === 1, { what: "the model call" });
    model.failNow();

    const final = await h.runtime.waitFor(run.id, ["paused", "completed", "failed"], { timeoutMs: 10_000 });
    expect(final.status).toBe("paused");
    expect(final.statusReason).toBe("model_error: model test:fail-on-cue failed: upstream 500");
    expect(statusMoves(await journalOf(run.id))).toEqual(["queued>running", "running>pausing", "pausing>paused"]);
  });
});

/** Calls the named tools in order, each once, with a fresh id. */
function sequenceOf(name: string, tools: AnyTool[], steps: string[], budgets?: { maxConsecutiveFailures: number }) {
  return defineAgent({
    name,
    version: "1",
    tools,
    ...(budgets ? { budgets } : {}),
    init: () => ({ messages: [], vars: { index: 0 } }),
    next: (state): Action => {
      const index = Number(state.vars.index);
      const toolName = steps[index];
      return toolName ? { type: "tool", toolCallId: `step-${index}`, toolName, input: { id: `s${index}` } } : { type: "done", output: index };
    },
    apply: (state) => {
      state.vars = { index: Number(state.vars.index) + 1 };
    },
  });
}
