import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { effectTool, harness, Ledger, tempSqlite, TestClock, waitUntil, type Harness, type TempSqlite } from "../testing/index.js";
import { durableAgent } from "../agents/durable-agent.js";
import { GateFailedError, PauseSignal } from "./function-agent.js";
import type { Json } from "./json.js";
import type { JournalEntry, RunUpdate } from "./store.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
let sqlite: TempSqlite | undefined;
afterEach(async () => {
  await h?.cleanup();
  await sqlite?.cleanup();
  h = undefined;
  sqlite = undefined;
});

/**
 * An agent named "changer" whose first step is "fetch" while `version` is 1 and "fetch-v2" after
 * (its code changed), then holds at an abortable step until its gate opens; `pausedAtHold` starts
 * it and pauses it there.
 */
function changerAgent() {
  const gate = new Gatekeeper();
  const changer = {
    version: 1,
    executed: [] as string[],
    agent: durableAgent({
      name: "changer",
      run: async (ctx) => {
        await ctx.step(changer.version === 1 ? "fetch" : "fetch-v2", () => (changer.executed.push("fetch"), "page"));
        await ctx.step("hold", async ({ signal }) => (await gate.pass(signal), null), { abortable: true });
        return "done";
      },
    }),
    async pausedAtHold(rt: Harness["runtime"]): Promise<{ id: string }> {
      const run = await rt.start("changer", null);
      await waitUntil(() => gate.started === 1, { what: "the hold step" });
      await rt.pause(run.id);
      await rt.waitFor(run.id, ["paused"]);
      return run;
    },
  };
  return changer;
}

const journalOf = (id: string, rt = h!.runtime): Promise<JournalEntry[]> => rt.journal(id, { limit: 100_000 });
const calls = (journal: JournalEntry[], type: string) => journal.filter((e) => e.type === type).map((e) => [e.callSeq, e.data.name]);

/** A gate the test opens: the step waits for it, and counts how often it started. */
class Gatekeeper {
  started = 0;
  finished = 0;
  private opened = false;
  private waiters: (() => void)[] = [];
  open(): void {
    this.opened = true;
    for (const w of this.waiters.splice(0)) w();
  }
  async pass(signal?: AbortSignal): Promise<void> {
    this.started++;
    if (!this.opened) {
      await new Promise<void>((resolve, reject) => {
        this.waiters.push(resolve);
        signal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      });
    }
    this.finished++;
  }
}

describe("async-function agents", () => {
  it("run plain async code whose model, tool and step calls are journaled gates", async () => {
    const ledger = new Ledger();
    const charge = effectTool({ name: "charge", ledger, compensable: true });
    const agent = durableAgent({
      name: "writer",
      tools: [charge],
      input: z.object({ topic: z.string() }),
      run: async (ctx, { topic }) => {
        const outline = await ctx.step("outline", () => ({ sections: [`${topic} 1`, `${topic} 2`] }));
        const draft = await ctx.model(`write about ${outline.sections.join(", ")}`);
        const receipt = await ctx.tool(charge, { id: "order-7" });
        return { words: draft.text.split(" ").length > 0, receipt: receipt.key };
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("writer", { topic: "tides" }, { model: "simulated:sim-1?seed=3&tps=Infinity" });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ words: true, receipt: `${run.id}:3` });
    const journal = await journalOf(run.id);
    expect(calls(journal, "call.started")).toEqual([
      [1, "outline"],
      [2, "simulated:sim-1"],
      [3, "charge"],
    ]);
    expect(calls(journal, "call.completed")).toEqual(calls(journal, "call.started"));
    expect(journal.find((e) => e.type === "call.started" && e.callSeq === 3)?.data).toMatchObject({ kind: "tool", key: `${run.id}:3`, input: { id: "order-7" } });
    expect(done.step).toBe(3);
    expect(done.usage.outputTokens).toBeGreaterThan(0);
    expect((await h.runtime.effects(run.id)).map((e) => [e.callSeq, e.tool, e.state])).toEqual([[3, "charge", "done"]]);
  });

  it("pause unwinds the function; resume replays journaled results and never calls them again", async () => {
    const gate = new Gatekeeper();
    const executed: string[] = [];
    const finallyRan: number[] = [];
    let invocations = 0;
    const agent = durableAgent({
      name: "stepper",
      run: async (ctx) => {
        invocations++;
        try {
          const a = await ctx.step("first", () => {
            executed.push("first");
            return 1;
          });
          const b = await ctx.step(
            "wait",
            async ({ signal }) => {
              executed.push("wait");
              await gate.pass(signal);
              return 2;
            },
            { abortable: true },
          );
          const c = await ctx.step("third", () => {
            executed.push("third");
            return 3;
          });
          return a + b + c;
        } finally {
          finallyRan.push(invocations);
        }
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("stepper", null);
    await waitUntil(() => gate.started === 1, { what: "the step to start" });
    await rt.pause(run.id, { actor: "alice" });
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused.inflightCalls).toEqual([]);
    expect(finallyRan).toEqual([1]);
    let journal = await journalOf(run.id);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 2, data: { name: "wait", reason: "pause" } });

    gate.open();
    await rt.resume(run.id, { actor: "alice" });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(done.output).toBe(6);
    // "first" ran once: its journaled result was replayed; the aborted step ran again.
    expect(executed).toEqual(["first", "wait", "wait", "third"]);
    journal = await journalOf(run.id);
    expect(calls(journal, "call.completed")).toEqual([
      [1, "first"],
      [2, "wait"],
      [3, "third"],
    ]);
  });

  it("several calls in flight at once; a pause aborts the abortable ones, waits for the other, and none completed runs again", async () => {
    let inFlight = 0;
    let peak = 0;
    const release = new Gatekeeper();
    const executions: Record<string, number> = {};
    const search = (name: string, abortable: boolean) =>
      tool({
        name,
        description: `search ${name}`,
        input: z.object({ q: z.string() }),
        abortable,
        execute: async ({ q }, { signal }) => {
          executions[name] = (executions[name] ?? 0) + 1;
          inFlight++;
          peak = Math.max(peak, inFlight);
          try {
            // All three wait here together: the call cannot finish unless the others started.
            await (abortable ? release.pass(signal) : release.pass());
            return `${name}:${q}`;
          } finally {
            inFlight--;
          }
        },
      });
    const tools = [search("web", true), search("news", true), search("archive", false)];
    const agent = durableAgent({
      name: "fanout",
      tools,
      run: async (ctx) => {
        const hits = await Promise.all(tools.map((t) => ctx.tool(t, { q: "tides" })));
        return hits;
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("fanout", null);
    await waitUntil(() => inFlight === 3, { what: "three calls in flight" });
    const running = await rt.get(run.id);
    expect(running.inflightCalls?.map((c) => c.name)).toEqual(["web", "news", "archive"]);
    await rt.pause(run.id, { actor: "alice" });
    await waitUntil(async () => (await rt.get(run.id)).waitingFor?.name === "archive", { what: "the pause to wait for the archive search" });
    release.open();
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused.status).toBe("paused");
    let journal = await journalOf(run.id);
    expect(calls(journal, "call.aborted").sort()).toEqual([
      [1, "web"],
      [2, "news"],
    ]);
    expect(calls(journal, "call.completed")).toEqual([[3, "archive"]]);

    await rt.resume(run.id, { actor: "alice" });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(done.output).toEqual(["web:tides", "news:tides", "archive:tides"]);
    expect(executions).toEqual({ web: 2, news: 2, archive: 1 });
    expect(peak).toBe(3);
    journal = await journalOf(run.id);
    // Idempotency keys follow program order, whatever order the calls finished in.
    expect(journal.filter((e) => e.type === "call.started").map((e) => [e.data.name, e.data.key])).toEqual([
      ["web", `${run.id}:1`],
      ["news", `${run.id}:2`],
      ["archive", `${run.id}:3`],
      ["web", `${run.id}:1`],
      ["news", `${run.id}:2`],
    ]);
  });

  it("code that changed between pause and resume stops with nondeterministic_replay, nothing executed twice", async () => {
    const changer = changerAgent();
    h = harness([changer.agent]);
    const rt = h.runtime;
    const run = await changer.pausedAtHold(rt);
    changer.version = 2;
    await rt.resume(run.id);
    const stopped = await rt.waitFor(run.id, (r) => r.status === "paused" && r.statusReason !== null && r.statusReason.startsWith("nondeterministic_replay"));
    expect(stopped.statusReason).toContain('gate 1 is step "fetch" in the journal, but the agent\'s code now calls step "fetch-v2"');
    expect(changer.executed).toEqual(["fetch"]);
    const journal = await journalOf(run.id);
    expect(journal.find((e) => e.type === "recovery" && e.data.problem === "nondeterministic_replay")).toMatchObject({
      callSeq: 1,
      data: { journaled: { kind: "step", name: "fetch" }, now: { kind: "step", name: "fetch-v2" } },
    });
    expect(calls(journal, "call.started")).toEqual([
      [1, "fetch"],
      [2, "hold"],
    ]);
  });

  it("a divergence whose pause is written after the function has unwound still ends paused (the executor waits for that write before reading the status)", async () => {
    const changer = changerAgent();
    h = harness([changer.agent]);
    const rt = h.runtime;
    const run = await changer.pausedAtHold(rt);
    // The divergence's pause lands 50 ms late, long after the function threw its PauseSignal.
    const update = h.store.update.bind(h.store);
    h.store.update = async (u) => {
      if (u.set?.statusReason?.startsWith("nondeterministic_replay")) await new Promise((resolve) => setTimeout(resolve, 50));
      return update(u);
    };
    changer.version = 2;
    await rt.resume(run.id);
    const stopped = await rt.waitFor(run.id, (r) => r.status === "paused" && r.statusReason !== null && r.statusReason.startsWith("nondeterministic_replay"), { timeoutMs: 5_000 });
    expect(stopped.status).toBe("paused");
  });

  it("ctx.now() and ctx.random() replay the journaled values", async () => {
    const gate = new Gatekeeper();
    const seen: { now: number; random: number }[] = [];
    const clock = new TestClock(1_000);
    const agent = durableAgent({
      name: "clocked",
      run: async (ctx) => {
        const now = ctx.now();
        const random = ctx.random();
        seen.push({ now, random });
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true, input: { now, random } });
        return { now, random };
      },
    });
    h = harness([agent], { clock });
    const rt = h.runtime;
    const run = await rt.start("clocked", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await rt.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    clock.advance(5_000);
    gate.open();
    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(seen).toHaveLength(2);
    expect(seen[1]).toEqual(seen[0]);
    expect(done.output).toEqual(seen[0]);
  });

  it("a failed step is journaled and thrown again on replay", async () => {
    const gate = new Gatekeeper();
    let attempts = 0;
    const caught: string[] = [];
    const agent = durableAgent({
      name: "failing",
      run: async (ctx) => {
        try {
          await ctx.step("flaky", () => {
            attempts++;
            throw new Error("upstream said no");
          });
        } catch (error) {
          if (!(error instanceof GateFailedError)) throw error;
          caught.push(error.message);
        }
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        return "recovered";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("failing", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await rt.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    gate.open();
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).output).toBe("recovered");
    expect(attempts).toBe(1);
    expect(caught).toEqual(["step flaky failed: upstream said no", "step flaky failed: upstream said no"]);
  });

  it("a function that swallows the pause signal is refused: its later calls do not run and its return value is not the output", async () => {
    const gate = new Gatekeeper();
    const executed: string[] = [];
    const agent = durableAgent({
      name: "stubborn",
      run: async (ctx) => {
        try {
          await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        } catch (error) {
          if (!PauseSignal.isInstance(error)) throw error;
          try {
            await ctx.step("sneak", () => {
              executed.push("sneak");
              return null;
            });
          } catch {
            // swallowed again
          }
          return "finished anyway";
        }
        return "normal";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("stubborn", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await rt.pause(run.id);
    const paused = await rt.waitFor(run.id, ["paused", "completed"]);
    expect(paused.status).toBe("paused");
    expect(paused.output).toBeNull();
    expect(executed).toEqual([]);
    const journal = await journalOf(run.id);
    expect(journal.some((e) => e.type === "recovery" && String(e.data.problem).includes("caught the pause signal"))).toBe(true);
  });

  it("cancel compensates completed steps newest first, in a process that never ran the function", async () => {
    const undone: Json[] = [];
    const gate = new Gatekeeper();
    const agent = durableAgent({
      name: "drafter",
      run: async (ctx) => {
        const draft = await ctx.step("create-draft", () => ({ draftId: "d-1" }), { compensate: (result) => void undone.push(["discard", result]) });
        const lock = await ctx.step("take-lock", () => ({ lockId: "l-9" }), { compensate: (result) => void undone.push(["unlock", result]) });
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        return { draft, lock };
      },
    });
    h = harness([agent]);
    const first = h.runtime;
    const run = await first.start("drafter", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await first.pause(run.id);
    await first.waitFor(run.id, ["paused"]);
    await first.close();

    const second = h.open();
    second.startWorker();
    await second.cancel(run.id, { actor: "bob" });
    const cancelled = await second.waitFor(run.id, ["cancelled"]);
    expect(undone).toEqual([
      ["unlock", { lockId: "l-9" }],
      ["discard", { draftId: "d-1" }],
    ]);
    expect(cancelled.report?.compensated).toEqual([
      { callSeq: 2, tool: "take-lock" },
      { callSeq: 1, tool: "create-draft" },
    ]);
  });

  it("after a crash, an idempotent step is retried with the same key and a non-idempotent one waits as uncertain", async () => {
    const keys: string[] = [];
    const never = new Promise<never>(() => undefined);
    let crashed = false;
    const agent = durableAgent({
      name: "crashy",
      run: async (ctx) => {
        await ctx.step(
          "charge",
          async ({ idempotencyKey }) => {
            keys.push(idempotencyKey);
            if (!crashed) await never;
            return "charged";
          },
          { idempotent: true },
        );
        await ctx.step("email", async () => {
          keys.push("email");
          if (crashed) await never;
          return "sent";
        });
        return "ok";
      },
    });
    h = harness([agent]);
    const first = h.runtime;
    const run = await first.start("crashy", null);
    await waitUntil(() => keys.length === 1, { what: "the charge to start" });
    await first.close();
    crashed = true;
    const clock = new TestClock(60_000);
    const second = h.open({ clock, workerPollMs: 10 });
    second.startWorker();
    // The charge is retried with its key; then the email starts and the second worker "dies" in it too.
    await waitUntil(() => keys.length === 3, { what: "the retried charge and the email" });
    expect(keys).toEqual([`${run.id}:1`, `${run.id}:1`, "email"]);
    await second.close();

    const third = h.open({ clock: new TestClock(200_000), workerPollMs: 10 });
    third.startWorker();
    const stopped = await third.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(stopped.statusReason).toBe("uncertain_effect");
    expect(stopped.inflight).toMatchObject({ callSeq: 2, name: "email", uncertain: true });
    expect(keys).toEqual([`${run.id}:1`, `${run.id}:1`, "email"]);

    await third.resume(run.id, { resolve: { action: "done", result: "sent" } });
    const done = await third.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(keys).toHaveLength(3);
    const journal = await journalOf(run.id, third);
    expect(journal.find((e) => e.type === "call.resolved")).toMatchObject({ callSeq: 2, data: { decision: "done" } });
  });

  it("budgets pause an async-function agent before the call that would exceed them", async () => {
    const agent = durableAgent({
      name: "looper",
      budgets: { maxSteps: 3 },
      run: async (ctx) => {
        for (let i = 0; i < 10; i++) await ctx.step(`s${i}`, () => i);
        return "never";
      },
    });
    h = harness([agent]);
    const run = await h.runtime.start("looper", null);
    const paused = await h.runtime.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.statusReason).toBe("budget_steps: 3 of 3 steps");
    expect(paused.step).toBe(3);
  });

  it("fork from a step replays up to it and goes live after", async () => {
    const executed: string[] = [];
    const agent = durableAgent({
      name: "forky",
      run: async (ctx) => {
        const out: Json[] = [];
        for (const name of ["a", "b", "c"]) {
          out.push(
            await ctx.step(name, () => {
              executed.push(name);
              return name;
            }),
          );
        }
        return out;
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("forky", null);
    await rt.waitFor(run.id, ["completed"]);
    const fork = await rt.fork(run.id, { fromStep: 1 });
    const done = await rt.waitFor(fork.id, ["completed", "failed", "paused"]);
    expect(done.output).toEqual(["a", "b", "c"]);
    expect(executed).toEqual(["a", "b", "c", "b", "c"]);
  });

  it("ctx.messages() delivers what people said once, and replays the same messages after a pause", async () => {
    const gate = new Gatekeeper();
    const heard: string[][] = [];
    const agent = durableAgent({
      name: "listener",
      run: async (ctx) => {
        await ctx.step("wait-for-words", async ({ signal }) => gate.pass(signal), { abortable: true });
        const said = await ctx.messages();
        heard.push(said.map((m) => `${m.author}: ${m.text}`));
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        return said.map((m) => m.text);
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("listener", null);
    await waitUntil(() => gate.started === 1, { what: "the first step" });
    await rt.say(run.id, "use metric units", { actor: "alice" });
    gate.open();
    await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(heard).toEqual([["alice: use metric units"]]);
    const done = await rt.get(run.id);
    expect(done.output).toEqual(["use metric units"]);
    expect(done.steering?.delivered).toBe(1);
    const journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "message.delivered").map((e) => e.data.text)).toEqual(["use metric units"]);
  });

  it("ctx.messages() never loses a message said by another process while its delivery is being written", async () => {
    sqlite = tempSqlite();
    const base = sqlite.open();
    // The worker's store, holding back its first write of a delivery until the test lets it go.
    let holding = false;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const store = new Proxy(base, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        return async (...args: unknown[]) => {
          const update = args[0] as RunUpdate;
          if (property === "update" && !holding && update.journal?.some((e) => e.type === "message.delivered")) {
            holding = true;
            await released;
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const gate = new Gatekeeper();
    const heard: string[][] = [];
    const agent = durableAgent({
      name: "listener3",
      run: async (ctx) => {
        await ctx.step("wait-for-words", async ({ signal }) => gate.pass(signal), { abortable: true });
        heard.push((await ctx.messages()).map((m) => m.text));
        heard.push((await ctx.messages()).map((m) => m.text));
        return heard.flat();
      },
    });
    h = harness([agent], { store });
    const rt = h.runtime;
    const other = h.open({ worker: false, store: sqlite.open() });
    const run = await rt.start("listener3", null);
    await waitUntil(() => gate.started === 1, { what: "the first step" });
    await rt.say(run.id, "A", { actor: "alice" });
    gate.open();
    await waitUntil(() => holding, { what: "the delivery of A to be on its way" });
    await other.say(run.id, "B", { actor: "bob" });
    release();

    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(heard).toEqual([["A"], ["B"]]);
    expect(done.steering?.messages.map((m) => m.text)).toEqual(["A", "B"]);
    expect(done.steering?.delivered).toBe(2);
    const journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "message.queued").map((e) => e.data.text)).toEqual(["A", "B"]);
    expect(journal.filter((e) => e.type === "message.delivered").map((e) => e.data.text)).toEqual(["A", "B"]);
  });

  it("a cancel compensates every completed step that declares compensate, however long the function's code takes between its steps", async () => {
    const undone: string[] = [];
    let holding = false;
    const agent = durableAgent({
      name: "crawler",
      run: async (ctx) => {
        await ctx.step("save-a", () => ({ id: "a" }), { compensate: (saved) => void undone.push(saved.id) });
        // A polite delay between two page visits (plain code, no call: nothing to journal).
        await new Promise((resolve) => setTimeout(resolve, 300));
        await ctx.step("save-b", () => ({ id: "b" }), { compensate: (saved) => void undone.push(saved.id) });
        await ctx.step("hold", async ({ signal }) => ((holding = true), await gateUntilAborted(signal)), { abortable: true });
        return "done";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("crawler", null);
    await waitUntil(() => holding, { what: "the run to reach the hold step" });
    await rt.pause(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["paused"]);
    // The worker that carries out the cancel replays the function to learn its compensations.
    await rt.cancel(run.id, { actor: "alice" });
    const cancelled = await rt.waitFor(run.id, ["cancelled"], { timeoutMs: 10_000 });
    expect({ compensated: cancelled.report!.compensated.map((c) => c.tool), failed: cancelled.report!.failed, undone }).toEqual({
      compensated: ["save-b", "save-a"],
      failed: [],
      undone: ["b", "a"],
    });
  });

  it("a replay after a pause returns the journaled messages, not the ones sent since", async () => {
    const gate = new Gatekeeper();
    const heard: string[][] = [];
    const agent = durableAgent({
      name: "listener2",
      run: async (ctx) => {
        const said = await ctx.messages();
        heard.push(said.map((m) => m.text));
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        const later = await ctx.messages();
        return [...said, ...later].map((m) => m.text);
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("listener2", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await rt.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    await rt.say(run.id, "sent while paused", { actor: "bob" });
    gate.open();
    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    // The first read (journaled as empty) replays empty; the message arrives at the next read.
    expect(heard).toEqual([[], []]);
    expect(done.output).toEqual(["sent while paused"]);
  });

  it("halt stops an async-function agent's calls at once; unhalt leaves it paused", async () => {
    const gate = new Gatekeeper();
    const agent = durableAgent({
      name: "haltable",
      run: async (ctx) => {
        await ctx.step("hold", async ({ signal }) => gate.pass(signal), { abortable: true });
        return "done";
      },
    });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("haltable", null);
    await waitUntil(() => gate.started === 1, { what: "the hold step" });
    await rt.halt({ actor: "admin", reason: "incident" });
    await waitUntil(async () => (await rt.get(run.id)).lease === null, { what: "the halted run to give up its lease" });
    const halted = await rt.get(run.id);
    expect(halted.status).toBe("halted");
    expect((await journalOf(run.id)).find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 1, data: { name: "hold" } });
    expect(gate.finished).toBe(0);
    await rt.unhalt({ actor: "admin" });
    expect((await rt.get(run.id)).status).toBe("paused");
    gate.open();
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).output).toBe("done");
  });
});

/** Waits until the signal aborts, then rejects: a step that holds until it is stopped. */
function gateUntilAborted(signal: AbortSignal): Promise<null> {
  return new Promise<null>((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
}
