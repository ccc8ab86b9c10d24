import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { StepAgentDefinition } from "../engine/agent.js";
import type { Runtime } from "../engine/runtime.js";
import type { JournalEntry } from "../engine/store.js";
import { tool, type AnyTool } from "../engine/tool.js";
import { SimulatedModel, type SimulatedTurn } from "../models/simulated-model.js";
import { effectTool, harness, Ledger, TestClock, waitUntil, type Harness } from "../testing/index.js";
import { showRun } from "../cli/format.js";
import { runView } from "../server/run-view.js";
import { toolLoopAgent } from "./tool-loop-agent.js";

/**
 * The tool loop runs one model turn's tool calls at once (`parallelToolCalls`): each call is
 * journaled and committed on its own, keyed in the turn's order; a pause or cancel reaches every
 * call in flight, and recovery after a crash decides for each.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const journalOf = (rt: Runtime, id: string): Promise<JournalEntry[]> => rt.journal(id, { limit: 100_000 });
const calls = (journal: JournalEntry[], type: string) => journal.filter((e) => e.type === type).map((e) => [e.callSeq, e.data.name]);

/** A model that asks for `tools` in one turn, then answers. */
function fanOutModel(tools: readonly string[]): SimulatedModel {
  return new SimulatedModel({
    tokensPerSecond: Number.POSITIVE_INFINITY,
    script: ({ turn }) => (turn === 0 ? { text: "searching", toolCalls: tools.map((toolName, i) => ({ toolName, input: { id: `q${i}` } })) } : { text: "summary" }),
  });
}

/** A promise that resolves once `open` is called, and rejects on the signal's abort. */
class Latch {
  private opened = false;
  private waiters: (() => void)[] = [];
  open(): void {
    this.opened = true;
    for (const w of this.waiters.splice(0)) w();
  }
  wait(signal?: AbortSignal): Promise<void> {
    if (this.opened) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiters.push(resolve);
      signal?.addEventListener("abort", () => reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason))), { once: true });
    });
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(new Error("aborted"))), { once: true });
  });

describe("parallel tool calls in the tool loop", () => {
  it("runs three 1 s tools of one turn at once: all three in flight before any finishes (about 1 s, not 3)", async () => {
    let started = 0;
    // How many calls had started when each call passed the latch, and when each one finished.
    const startedWhenReleased: number[] = [];
    const startedWhenFinished: number[] = [];
    const allStarted = new Latch();
    const search = (name: string) =>
      tool({
        name,
        description: `search ${name}`,
        input: z.object({ id: z.string() }),
        execute: async ({ id }) => {
          if (++started === 3) allStarted.open();
          // Each call waits until all three have started: they cannot finish one after another.
          await allStarted.wait();
          startedWhenReleased.push(started);
          await sleep(1_000);
          startedWhenFinished.push(started);
          return `${name}:${id}`;
        },
      });
    const agent = toolLoopAgent({ name: "fanout", model: fanOutModel(["web", "news", "archive"]), tools: [search("web"), search("news"), search("archive")] });
    h = harness([agent]);
    const t0 = performance.now();
    const run = await h.runtime.start("fanout", "tides");
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    const wallMs = performance.now() - t0;
    console.log(`parallel tool calls: a turn with three 1 s tools took ${Math.round(wallMs)} ms (one after another: 3,000 ms at least)`);
    expect(done).toMatchObject({ status: "completed", output: "summary" });
    // Order, not wall time (the figure is printed; bench/parallel-tool-calls.ts measures it): all
    // three were in flight before any of them finished, in the tools' view and in the journal.
    expect(startedWhenReleased).toEqual([3, 3, 3]);
    expect(startedWhenFinished).toEqual([3, 3, 3]);
    const journal = await journalOf(h.runtime, run.id);
    const toolEntries = journal.filter((e) => (e.type === "call.started" || e.type === "call.completed") && e.data.kind === "tool").map((e) => e.type);
    expect(toolEntries).toEqual(["call.started", "call.started", "call.started", "call.completed", "call.completed", "call.completed"]);
    // One write started all three; keys follow the turn's order.
    const startedEntries = journal.filter((e) => e.type === "call.started" && e.data.kind === "tool");
    expect(startedEntries.map((e) => [e.data.name, e.data.key])).toEqual([
      ["web", `${run.id}:2`],
      ["news", `${run.id}:3`],
      ["archive", `${run.id}:4`],
    ]);
    expect(new Set(startedEntries.map((e) => e.at)).size).toBe(1);
    expect(journal.filter((e) => e.type === "call.completed" && e.data.kind === "tool")).toHaveLength(3);
    const final = await h.runtime.get(run.id);
    expect(final.inflight).toBeNull();
    expect(final.inflightCalls ?? []).toEqual([]);
  });

  it("runs them one after another with parallelToolCalls: false, and at most `n` at once with a number", async () => {
    const peaks: Record<string, number> = {};
    const make = (agentName: string) => {
      let inFlight = 0;
      return ["a", "b", "c"].map((name) =>
        tool({
          name,
          description: name,
          input: z.object({ id: z.string() }),
          execute: async () => {
            peaks[agentName] = Math.max(peaks[agentName] ?? 0, ++inFlight);
            await sleep(30);
            inFlight--;
            return name;
          },
        }),
      );
    };
    const sequential = toolLoopAgent({ name: "one-by-one", model: fanOutModel(["a", "b", "c"]), tools: make("one-by-one"), parallelToolCalls: false });
    const pairs = toolLoopAgent({ name: "pairs", model: fanOutModel(["a", "b", "c"]), tools: make("pairs"), parallelToolCalls: 2 });
    h = harness([sequential, pairs]);
    for (const name of ["one-by-one", "pairs"]) {
      const run = await h.runtime.start(name, "go");
      expect((await h.runtime.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
      const journal = await journalOf(h.runtime, run.id);
      expect(journal.filter((e) => e.type === "call.started" && e.data.kind === "tool").map((e) => [e.data.name, e.data.key])).toEqual([
        ["a", `${run.id}:2`],
        ["b", `${run.id}:3`],
        ["c", `${run.id}:4`],
      ]);
    }
    expect(peaks).toEqual({ "one-by-one": 1, pairs: 2 });
    expect(() => toolLoopAgent({ name: "bad", parallelToolCalls: 0 })).toThrow(/parallelToolCalls/);
  });

  it("a tool that changes its input changes its own copy: not the call kept for recovery, nor the conversation", async () => {
    const release = new Latch();
    const mutator = tool({
      name: "mutator",
      description: "changes what it was given",
      input: z.object({ id: z.string(), opts: z.any() }),
      execute: async (input, ctx) => {
        (input.opts as { seen: boolean; added?: string }).seen = true;
        (input.opts as { seen: boolean; added?: string }).added = "by the tool";
        await release.wait(ctx.signal);
        return "done";
      },
    });
    const quick = tool({ name: "quick", description: "answers at once", input: z.object({ id: z.string() }), execute: async () => "quick" });
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn }): SimulatedTurn =>
        turn === 0 ? { text: "both", toolCalls: [{ toolName: "mutator", input: { id: "m", opts: { seen: false } } }, { toolName: "quick", input: { id: "q" } }] } : { text: "summary" },
    });
    h = harness([toolLoopAgent({ name: "mutating", model, tools: [mutator, quick] })]);
    const run = await h.runtime.start("mutating", "go");
    // The quick call's completion rewrites the run's record of the calls still in flight.
    await waitUntil(async () => (await journalOf(h!.runtime, run.id)).some((e) => e.type === "call.completed" && e.data.name === "quick"));
    const during = await h.runtime.get(run.id);
    const kept = during.inflightCalls?.find((c) => c.name === "mutator");
    expect((kept?.action as { input?: unknown } | undefined)?.input).toEqual({ id: "m", opts: { seen: false } });
    release.open();
    await h.runtime.waitFor(run.id, ["completed"]);
    const asked = (await h.runtime.state(run.id)).messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
    expect(asked.find((c) => c.toolName === "mutator")?.input).toEqual({ id: "m", opts: { seen: false } });
    const started = (await journalOf(h.runtime, run.id)).find((e) => e.type === "call.started" && e.data.name === "mutator");
    expect(started?.data.input).toEqual({ id: "m", opts: { seen: false } });
  });

  it("keeps results in the order they finished, and shows the model them in the order it asked", async () => {
    const seen: string[][] = [];
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn, lastToolResults }) => {
        if (turn === 0) return { text: "searching", toolCalls: ["a", "b", "c"].map((toolName, i) => ({ toolName, input: { id: `q${i}` } })) };
        seen.push(lastToolResults.map((m) => m.toolName));
        return { text: "summary" };
      },
    });
    const journaled = async (runId: string, name: string) => {
      while (!(await journalOf(h!.runtime, runId)).some((e) => e.type === "call.completed" && e.data.name === name)) await sleep(5);
    };
    // c finishes first, then b, then a: each waits until the one after it is journaled.
    const ordered = (name: string, after?: string) =>
      tool({ name, description: name, input: z.object({ id: z.string() }), execute: async (_input, { runId }) => (after ? await journaled(runId, after) : undefined, name) });
    h = harness([toolLoopAgent({ name: "ordered", model, tools: [ordered("a", "b"), ordered("b", "c"), ordered("c")] })]);
    const run = await h.runtime.start("ordered", "go");
    expect(await h.runtime.waitFor(run.id, ["paused", "completed", "failed"])).toMatchObject({ status: "completed" });
    expect((await h.runtime.state(run.id)).messages.filter((m) => m.role === "tool").map((m) => m.role === "tool" && m.toolName)).toEqual(["c", "b", "a"]);
    expect(seen).toEqual([["a", "b", "c"]]);
  });

  it("checks budgets for each call: a turn that would pass maxSteps starts only the calls within it", async () => {
    const ran: string[] = [];
    const named = (name: string) => tool({ name, description: name, input: z.object({ id: z.string() }), execute: () => (ran.push(name), name) });
    h = harness([toolLoopAgent({ name: "budgeted", model: fanOutModel(["a", "b", "c"]), tools: [named("a"), named("b"), named("c")], budgets: { maxSteps: 3 } })]);
    const run = await h.runtime.start("budgeted", "go");
    const paused = await h.runtime.waitFor(run.id, ["paused", "completed", "failed"]);
    // Step 1 is the model call; a and b take steps 2 and 3; c would be the fourth.
    expect(paused).toMatchObject({ status: "paused", statusReason: expect.stringMatching(/^budget_steps/) });
    expect(ran.sort()).toEqual(["a", "b"]);
    await h.runtime.resume(run.id, { budgets: { maxSteps: 10 } });
    expect(await h.runtime.waitFor(run.id, ["paused", "completed", "failed"])).toMatchObject({ status: "completed", output: "summary" });
    expect(ran.sort()).toEqual(["a", "b", "c"]);
  });

  it("an apply that throws fails the run: the other calls are aborted or journaled without being applied", async () => {
    const slow = (name: string, abortable: boolean, ms: number) =>
      tool({ name, description: name, input: z.object({ id: z.string() }), abortable, execute: async (_input, { signal }) => (await sleep(ms, abortable ? signal : undefined), name) });
    const base = toolLoopAgent({ name: "brittle", model: fanOutModel(["a", "b", "c"]), tools: [slow("a", true, 60_000), slow("b", false, 0), slow("c", false, 50)] }) as StepAgentDefinition;
    const agent: StepAgentDefinition = {
      ...base,
      apply: (state, action, outcome) => {
        if (action.type === "tool" && action.toolName === "b") throw new Error("cannot fold in b");
        return base.apply(state, action, outcome);
      },
    };
    h = harness([agent]);
    const run = await h.runtime.start("brittle", "go");
    const failed = await h.runtime.waitFor(run.id, ["failed", "completed", "paused"]);
    expect(failed).toMatchObject({ status: "failed", error: { code: "agent_error", message: expect.stringContaining("cannot fold in b") } });
    const settled = await waitUntil(async () => {
      const r = await h!.runtime.get(run.id);
      return (r.inflightCalls ?? []).length === 0 && r;
    }, { what: "no call left in flight" });
    expect(settled.inflight).toBeNull();
    const journal = await journalOf(h.runtime, run.id);
    expect(calls(journal, "call.aborted")).toEqual([[2, "a"]]);
    expect(journal.find((e) => e.type === "call.completed" && e.callSeq === 4)?.data).toMatchObject({ name: "c", notApplied: "run_failed" });
    expect((await h.runtime.state(run.id)).messages.filter((m) => m.role === "tool")).toEqual([]);
  });

  describe("pause with all three in flight", () => {
    /**
     * web and news are abortable, archive is not. However the calls are interrupted, their
     * results land in one order: archive, then web, then news (each waits until the one before
     * is journaled), so an interrupted run and an uninterrupted one hold the same conversation.
     */
    function fanOut() {
      const executions: Record<string, number> = {};
      let started = 0;
      let inFlight = 0;
      const allStarted = new Latch();
      const archiveReleased = new Latch();
      const journaled = async (runId: string, name: string, signal: AbortSignal) => {
        while (!(await journalOf(h!.runtime, runId)).some((e) => e.type === "call.completed" && e.data.name === name)) await sleep(5, signal);
      };
      const search = (name: string, abortable: boolean, before: (runId: string, signal: AbortSignal) => Promise<void>) =>
        tool({
          name,
          description: `search ${name}`,
          input: z.object({ id: z.string() }),
          abortable,
          execute: async ({ id }, { signal, runId }) => {
            executions[name] = (executions[name] ?? 0) + 1;
            inFlight++;
            if (++started === 3) allStarted.open();
            try {
              await allStarted.wait(abortable ? signal : undefined);
              await before(runId, signal);
              return `${name}:${id}`;
            } finally {
              inFlight--;
            }
          },
        });
      const tools: AnyTool[] = [
        search("web", true, (runId, signal) => journaled(runId, "archive", signal)),
        search("news", true, (runId, signal) => journaled(runId, "web", signal)),
        search("archive", false, () => archiveReleased.wait()),
      ];
      return { tools, executions, archiveReleased, inFlight: () => inFlight };
    }

    it("aborts the abortable calls, waits for the other and journals it; none that completed runs again on resume", async () => {
      const interrupted = fanOut();
      const uninterrupted = fanOut();
      uninterrupted.archiveReleased.open();
      h = harness([
        toolLoopAgent({ name: "interrupted", model: fanOutModel(["web", "news", "archive"]), tools: interrupted.tools }),
        toolLoopAgent({ name: "uninterrupted", model: fanOutModel(["web", "news", "archive"]), tools: uninterrupted.tools }),
      ]);
      const rt = h.runtime;
      const reference = await rt.start("uninterrupted", "tides");
      expect((await rt.waitFor(reference.id, ["completed", "failed", "paused"])).status).toBe("completed");

      const run = await rt.start("interrupted", "tides");
      await waitUntil(() => interrupted.inFlight() === 3, { what: "three calls in flight" });
      const running = await rt.get(run.id);
      expect(running.inflightCalls?.map((c) => [c.callSeq, c.name])).toEqual([
        [2, "web"],
        [3, "news"],
        [4, "archive"],
      ]);
      expect(running.inflight).toMatchObject({ callSeq: 2, name: "web" });
      // `tether show` lists them side by side.
      const shown = showRun(await runView(rt, running), Date.now());
      expect(shown.split("\n").filter((line) => line.startsWith("in flight"))).toEqual([
        "in flight tool web (call 2)",
        "in flight tool news (call 3)",
        "in flight tool archive (call 4)",
      ]);
      await rt.pause(run.id, { actor: "alice" });
      const pausing = await waitUntil(async () => {
        const r = await rt.get(run.id);
        return r.waitingFor?.name === "archive" && r;
      }, { what: "the pause to wait for the archive search" });
      expect(pausing).toMatchObject({ status: "pausing", waitingFor: { kind: "tool", name: "archive", callSeq: 4 } });
      // Both abortable calls end while archive still runs.
      let journal = await waitUntil(async () => {
        const entries = await journalOf(rt, run.id);
        return calls(entries, "call.aborted").length === 2 && entries;
      }, { what: "web and news aborted" });
      expect(calls(journal, "call.completed")).toEqual([[1, expect.any(String)]]);
      expect(interrupted.inFlight()).toBe(1);
      interrupted.archiveReleased.open();
      const paused = await rt.waitFor(run.id, ["paused"]);
      expect(paused.inflight).toBeNull();
      expect(paused.inflightCalls).toEqual([]);
      journal = await journalOf(rt, run.id);
      expect(calls(journal, "call.aborted").sort()).toEqual([
        [2, "web"],
        [3, "news"],
      ]);
      expect(calls(journal, "call.completed")).toEqual([
        [1, expect.any(String)],
        [4, "archive"],
      ]);

      await rt.resume(run.id, { actor: "alice" });
      const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done).toMatchObject({ status: "completed", output: "summary" });
      expect(interrupted.executions).toEqual({ web: 2, news: 2, archive: 1 });
      journal = await journalOf(rt, run.id);
      // Keys follow the turn's order, whatever order the calls finished in; the aborted ones keep theirs.
      expect(journal.filter((e) => e.type === "call.started" && e.data.kind === "tool").map((e) => [e.callSeq, e.data.name, e.data.key, e.data.reissueOf])).toEqual([
        [2, "web", `${run.id}:2`, undefined],
        [3, "news", `${run.id}:3`, undefined],
        [4, "archive", `${run.id}:4`, undefined],
        [5, "web", `${run.id}:2`, 2],
        [6, "news", `${run.id}:3`, 3],
      ]);
      const conversation = (await rt.state(run.id)).messages;
      expect(conversation).toEqual((await rt.state(reference.id)).messages);
      expect(conversation.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["archive:q2", "web:q0", "news:q1"]);
    });
  });

  it("cancel waits for the calls it cannot abort, then compensates the completed ones newest first", async () => {
    const ledger = new Ledger();
    let inFlight = 0;
    const release = new Latch();
    const held = (key: string) => {
      inFlight++;
      return key.endsWith(":4") ? new Promise<void>(() => undefined) : release.wait();
    };
    const tools = [
      effectTool({ name: "book", ledger, compensable: true, afterEffect: held }),
      effectTool({ name: "charge", ledger, compensable: true, afterEffect: held }),
      effectTool({ name: "notify", ledger, compensable: true, abortable: true, durationMs: 60_000, afterEffect: (key) => void held(key) }),
    ];
    h = harness([toolLoopAgent({ name: "trip", model: fanOutModel(["book", "charge", "notify"]), tools })], { compensation: { backoffMs: 1 } });
    const rt = h.runtime;
    const run = await rt.start("trip", "go");
    await waitUntil(() => inFlight === 3, { what: "three calls in flight" });
    await rt.cancel(run.id, { actor: "alice" });
    await waitUntil(async () => (await rt.get(run.id)).waitingFor?.name === "book", { what: "the cancel to wait for book" });
    release.open();
    const done = await rt.waitFor(run.id, ["cancelled"]);
    const journal = await journalOf(rt, run.id);
    expect(calls(journal, "call.aborted")).toEqual([[4, "notify"]]);
    expect(calls(journal, "call.completed").slice(1).sort()).toEqual([
      [2, "book"],
      [3, "charge"],
    ]);
    expect(done.report).toMatchObject({
      compensated: [
        { callSeq: 3, tool: "charge" },
        { callSeq: 2, tool: "book" },
      ],
      uncertain: [],
    });
    expect(ledger.compensations.map((c) => [c.tool, c.key])).toEqual([
      ["charge", `${run.id}:3:compensate`],
      ["book", `${run.id}:2:compensate`],
    ]);
  });

  describe("a crash with two calls in flight", () => {
    const never = new Promise<void>(() => undefined);
    const holdFirst = (_key: string, execution: number) => (execution === 1 ? never : undefined);

    async function crashWithTwoInFlight(fetchOptions: { idempotent?: boolean }) {
      const ledger = new Ledger();
      const tools = [effectTool({ name: "charge", ledger, afterEffect: holdFirst }), effectTool({ name: "fetch", ledger, afterEffect: holdFirst, ...fetchOptions })];
      h = harness([toolLoopAgent({ name: "payer", model: fanOutModel(["charge", "fetch"]), tools })]);
      const first = h.runtime;
      const run = await first.start("payer", "go");
      await waitUntil(() => ledger.executionsOf("charge") === 1 && ledger.executionsOf("fetch") === 1, { what: "both calls in flight" });
      const before = await first.get(run.id);
      expect(before.inflightCalls?.map((c) => [c.callSeq, c.name])).toEqual([
        [2, "charge"],
        [3, "fetch"],
      ]);
      await first.close();
      const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10 });
      return { ledger, run: before, second };
    }

    it("retries the idempotent one with the same key and puts the other to a person as uncertain", async () => {
      const { ledger, run, second } = await crashWithTwoInFlight({ idempotent: true });
      second.startWorker();
      const paused = await second.waitFor(run.id, ["paused", "completed", "failed"]);
      expect(paused).toMatchObject({ status: "paused", statusReason: "uncertain_effect", inflight: { callSeq: 2, name: "charge", uncertain: true } });
      expect(paused.inflightCalls?.map((c) => c.name)).toEqual(["charge"]);
      expect(ledger.keysOf("fetch")).toEqual([`${run.id}:3`, `${run.id}:3`]);
      expect(ledger.executionsOf("charge")).toBe(1);
      let journal = await journalOf(second, run.id);
      expect(journal.filter((e) => e.type === "recovery" && e.data.decision !== undefined).map((e) => [e.callSeq, e.data.decision])).toEqual([
        [3, "retry"],
        [2, "uncertain"],
      ]);
      expect(calls(journal, "call.uncertain")).toEqual([[2, "charge"]]);

      await second.resume(run.id, { resolve: { action: "done", result: { id: "q0", key: "from-the-bank" } }, actor: "dana" });
      const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done).toMatchObject({ status: "completed", output: "summary" });
      expect(ledger.executionsOf("charge")).toBe(1);
      journal = await journalOf(second, run.id);
      expect(calls(journal, "call.completed").slice(1)).toEqual([
        [3, "fetch"],
        [2, "charge"],
        [4, expect.any(String)],
      ]);
    });

    it("asks about uncertain calls one at a time, and a cancel reports every call still in flight", async () => {
      const { ledger, run, second } = await crashWithTwoInFlight({});
      second.startWorker();
      const paused = await second.waitFor(run.id, ["paused", "completed", "failed"]);
      expect(paused).toMatchObject({ status: "paused", statusReason: "uncertain_effect", inflight: { callSeq: 2, name: "charge", uncertain: true } });
      expect(paused.inflightCalls?.map((c) => c.name)).toEqual(["charge", "fetch"]);
      await second.resume(run.id, { resolve: { action: "skip" }, actor: "dana" });
      const next = await second.waitFor(run.id, (r) => r.status === "paused" && r.inflight?.callSeq === 3);
      expect(next).toMatchObject({ statusReason: "uncertain_effect", inflight: { callSeq: 3, name: "fetch", uncertain: true } });
      expect(next.inflightCalls?.map((c) => c.name)).toEqual(["fetch"]);
      await second.cancel(run.id, { actor: "dana" });
      const cancelled = await second.waitFor(run.id, ["cancelled"]);
      expect(cancelled.report?.uncertain).toEqual([{ callSeq: 3, tool: "fetch", reason: "uncertain_effect" }]);
      expect(ledger.executionsOf("charge") + ledger.executionsOf("fetch")).toBe(2);
    });

    it("cancelled right after the crash, the report lists both calls in flight", async () => {
      const { run, second } = await crashWithTwoInFlight({});
      await second.cancel(run.id, { actor: "dana" });
      const cancelled = await second.waitFor(run.id, ["cancelled"]);
      expect(cancelled.report?.uncertain).toEqual([
        { callSeq: 2, tool: "charge", reason: "uncertain_effect" },
        { callSeq: 3, tool: "fetch", reason: "in flight when cancelled" },
      ]);
    });
  });
});
