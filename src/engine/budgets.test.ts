import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, TestClock, waitUntil, type Harness } from "../testing/index.js";
import { defaultBudgets } from "./budgets.js";
import type { JournalEntry } from "./store.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

function statuses(journal: JournalEntry[]): string[] {
  return journal.filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}`);
}

function steps(n: number, same = false) {
  return Array.from({ length: n }, (_, i) => ({ tool: "work", input: { id: same ? "same" : `item-${i}` } }));
}

describe("budgets and guards pause the run", () => {
  it("maxSteps: pauses with the reason, stays paused until the budget is raised, then continues", async () => {
    const ledger = new Ledger();
    h = harness([sequenceAgent({ name: "worker", tools: [effectTool({ name: "work", ledger })], steps: steps(4), budgets: { maxSteps: 2 } })]);
    const rt = h.runtime;
    const run = await rt.start("worker", null);
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused).toMatchObject({ status: "paused", statusReason: "budget_steps: 2 of 2 steps", step: 2 });
    expect(ledger.executionsOf("work")).toBe(2);
    const journal = await rt.journal(run.id);
    expect(journal.find((e) => e.type === "budget.tripped")?.data).toEqual({ reason: "budget_steps: 2 of 2 steps" });
    expect(statuses(journal)).toEqual(["queued>running", "running>pausing", "pausing>paused"]);

    await rt.settled(run.id);
    // Resuming without raising the budget would pause again at once: refused, with the budget named.
    await expect(rt.resume(run.id, { actor: "bob" })).rejects.toMatchObject({ code: "budget_exceeded", message: expect.stringContaining("budget_steps: 2 of 2 steps") });
    expect((await rt.get(run.id)).status).toBe("paused");
    expect((await rt.journal(run.id)).at(-1)).toMatchObject({ type: "control", data: { command: "resume", actor: "bob", outcome: "refused: budget_exceeded" } });
    // Raising it, but not enough, is refused the same way.
    await expect(rt.resume(run.id, { budgets: { maxSteps: 2 } })).rejects.toMatchObject({ code: "budget_exceeded" });
    expect(ledger.executionsOf("work")).toBe(2);

    await rt.settled(run.id);
    await rt.resume(run.id, { budgets: { maxSteps: 10 } });
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done).toMatchObject({ status: "completed", output: 4, budgets: { maxSteps: 10 } });
    expect(ledger.executionsOf("work")).toBe(4);
  });

  it("maxTokens: pauses once the model calls used the budget; a raised budget continues", async () => {
    const search = effectTool({ name: "work", ledger: new Ledger() });
    h = harness([toolLoopAgent({ name: "thinker", tools: [search], model: "simulated:sim-1?seed=2&tps=Infinity", budgets: { maxTokens: 30 } })]);
    const rt = h.runtime;
    const run = await rt.start("thinker", "plan a trip");
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toMatch(/^budget_tokens: \d+ of 30 tokens used$/);
    expect(paused.usage.inputTokens + paused.usage.outputTokens).toBeGreaterThanOrEqual(30);
    expect(paused.step).toBe(1);
    await rt.settled(run.id);
    await rt.resume(run.id, { budgets: { maxTokens: 1_000_000 } });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
  });

  it("the loop detector: the same tool call N times in a row pauses the run", async () => {
    const ledger = new Ledger();
    h = harness([sequenceAgent({ name: "looper", tools: [effectTool({ name: "work", ledger })], steps: steps(5, true), budgets: { maxRepeatedToolCalls: 3 } })]);
    const rt = h.runtime;
    const run = await rt.start("looper", null);
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused).toMatchObject({ status: "paused", statusReason: "loop_detected: the same tool call 3 times in a row" });
    expect(ledger.executionsOf("work")).toBe(2);
    await rt.settled(run.id);
    await rt.resume(run.id, { budgets: { maxRepeatedToolCalls: 10 } });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(ledger.executionsOf("work")).toBe(5);
  });

  it("maxWallTimeMs counts running time only, not time spent paused", async () => {
    const ledger = new Ledger();
    const clock = new TestClock();
    let held: (() => void) | undefined;
    const work = effectTool({ name: "work", ledger, beforeEffect: (_key, n) => (n === 1 ? new Promise<void>((resolve) => (held = resolve)) : undefined) });
    h = harness([sequenceAgent({ name: "timed", tools: [work], steps: steps(3), budgets: { maxWallTimeMs: 10_000 } })], { clock });
    const rt = h.runtime;
    const run = await rt.start("timed", null);
    await waitUntil(() => held);
    clock.advance(20_000);
    held!();
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.statusReason).toMatch(/^budget_time: \d+ of 10000 ms$/);
    expect(paused.activeMs).toBeGreaterThanOrEqual(20_000);
    expect(paused.activeMs).toBeLessThan(30_000);
    expect(paused.runningSince).toBeNull();

    await rt.settled(run.id);
    clock.advance(3_600_000);
    await rt.resume(run.id, { budgets: { maxWallTimeMs: 60_000 } });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(done.activeMs).toBeLessThan(30_000);
  });
});

describe("the repeated-failure guard", () => {
  it("pauses after maxConsecutiveFailures failed calls in a row, whatever their arguments, with the failures as evidence; resume gives it another go", async () => {
    const ledger = new Ledger();
    const flaky = effectTool({
      name: "flaky",
      ledger,
      beforeEffect: () => {
        throw new Error("upstream says no");
      },
    });
    h = harness([sequenceAgent({ name: "stubborn", tools: [flaky], steps: Array.from({ length: 8 }, (_, i) => ({ tool: "flaky", input: { id: `item-${i}` } })), budgets: { maxConsecutiveFailures: 3 } })]);
    const rt = h.runtime;
    const run = await rt.start("stubborn", null);
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toMatch(/^repeated_failures: 3 failed tool calls in a row \(last: flaky: .*upstream says no\)$/);
    expect(ledger.executionsOf("flaky")).toBe(3);
    const journal = await rt.journal(run.id);
    const tripped = journal.find((e) => e.type === "budget.tripped");
    expect((tripped?.data.failures as { tool: string; message: string }[]).map((f) => f.tool)).toEqual(["flaky", "flaky", "flaky"]);
    expect(journal.filter((e) => e.type === "call.failed")).toHaveLength(3);
    expect(journal.slice(journal.indexOf(tripped!)).filter((e) => e.type === "call.started")).toEqual([]);

    await rt.settled(run.id);
    await rt.resume(run.id, { actor: "ops" });
    const again = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(again.statusReason).toMatch(/^repeated_failures: 3 /);
    expect(ledger.executionsOf("flaky")).toBe(6);
  });

  it("is on by default at 5", () => {
    expect(defaultBudgets.maxConsecutiveFailures).toBe(5);
  });
});
