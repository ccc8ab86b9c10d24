import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, TestClock, waitUntil, type EffectToolOptions, type Harness } from "../testing/index.js";
import type { Runtime } from "./runtime.js";
import type { JournalEntry, RunRecord } from "./store.js";

/**
 * A crash, in process: the first runtime is closed in the middle of a call (it writes nothing
 * more, as if killed) and a second runtime on its own connection to the same file, with a clock
 * past the first one's lease, takes the run over.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const never = new Promise<void>(() => undefined);
const holdFirst = (_key: string, execution: number) => (execution === 1 ? never : undefined);

async function journalOf(rt: Runtime, id: string): Promise<JournalEntry[]> {
  return rt.journal(id, { limit: 100_000 });
}

/** Starts a two-step run whose first call (tool `charge`) the first worker never finishes. */
async function crashDuringCharge(charge: Omit<EffectToolOptions, "name" | "ledger">) {
  const ledger = new Ledger();
  const agent = sequenceAgent({
    name: "payer",
    tools: [effectTool({ name: "charge", ledger, compensable: true, ...charge }), effectTool({ name: "receipt", ledger })],
    steps: [
      { tool: "charge", input: { id: "order-1" } },
      { tool: "receipt", input: { id: "order-1" } },
    ],
  });
  h = harness([agent]);
  const first = h.runtime;
  const run = await first.start("payer", null);
  await waitUntil(() => ledger.executionsOf("charge") === 1);
  const before = await first.get(run.id);
  await first.close();
  expect(await first.get(run.id)).toEqual(before);
  const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10 });
  return { ledger, run: before, first, second };
}

function recoveryDecision(journal: JournalEntry[]): unknown {
  return journal.find((e) => e.type === "recovery" && e.data.decision !== undefined)?.data.decision;
}

describe("recovery of a call in flight when its worker died", () => {
  it("retries an idempotent tool with the same idempotency key", async () => {
    const { ledger, run, second } = await crashDuringCharge({ idempotent: true, afterEffect: holdFirst });
    expect(run.inflight).toMatchObject({ callSeq: 1, kind: "tool", name: "charge" });
    second.startWorker();
    const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    const keys = ledger.keysOf("charge");
    expect(keys).toEqual([`${run.id}:1`, `${run.id}:1`]);
    const journal = await journalOf(second, run.id);
    expect(recoveryDecision(journal)).toBe("retry");
    expect(journal.find((e) => e.type === "recovery" && e.data.previousWorker !== undefined)?.data).toMatchObject({ previousWorker: "worker-a", worker: "worker-b" });
    expect(journal.filter((e) => e.type === "call.started" && e.callSeq === 1)).toHaveLength(1);
    expect(journal.filter((e) => e.type === "call.completed").map((e) => e.callSeq)).toEqual([1, 2]);
  });

  it("asks check: an effect that happened is taken as done and not run again", async () => {
    const { ledger, run, second } = await crashDuringCharge({ checkable: true, afterEffect: holdFirst });
    second.startWorker();
    const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("charge")).toBe(1);
    const journal = await journalOf(second, run.id);
    expect(recoveryDecision(journal)).toBe("apply");
    expect((await second.state(run.id)).messages[0]).toMatchObject({ role: "tool", toolName: "charge", content: { id: "order-1", key: `${run.id}:1` } });
    expect((await second.effects(run.id)).map((e) => [e.callSeq, e.tool, e.state])).toEqual([[1, "charge", "done"]]);
  });

  it("asks check: an effect that did not happen is issued again with the same key", async () => {
    const { ledger, run, second } = await crashDuringCharge({ checkable: true, beforeEffect: holdFirst });
    second.startWorker();
    const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(ledger.keysOf("charge")).toEqual([`${run.id}:1`, `${run.id}:1`]);
    expect([...ledger.effects.keys()].filter((k) => k === `${run.id}:1`)).toHaveLength(1);
    expect(recoveryDecision(await journalOf(second, run.id))).toBe("retry");
  });

  describe("a tool that is neither idempotent nor checkable", () => {
    async function uncertainRun(): Promise<{ ledger: Ledger; run: RunRecord; second: Runtime }> {
      const crashed = await crashDuringCharge({ afterEffect: holdFirst });
      crashed.second.startWorker();
      const paused = await crashed.second.waitFor(crashed.run.id, ["paused", "completed", "failed"]);
      expect(paused).toMatchObject({ status: "paused", statusReason: "uncertain_effect", inflight: { callSeq: 1, name: "charge", uncertain: true } });
      const journal = await journalOf(crashed.second, crashed.run.id);
      expect(journal.find((e) => e.type === "call.uncertain")).toMatchObject({ callSeq: 1, data: { kind: "tool", name: "charge" } });
      expect(crashed.ledger.executionsOf("charge")).toBe(1);
      return { ledger: crashed.ledger, run: crashed.run, second: crashed.second };
    }

    it("becomes uncertain and pauses; resume without a decision refuses with uncertain_effect", async () => {
      const { run, second } = await uncertainRun();
      const error = await second.resume(run.id).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "uncertain_effect", details: { callSeq: 1, toolName: "charge" } });
      expect((await second.get(run.id)).status).toBe("paused");
      const journal = await journalOf(second, run.id);
      expect(journal[journal.length - 1]).toMatchObject({ type: "control", data: { command: "resume", outcome: "refused: uncertain_effect" } });
    });

    it("resolve retry issues it again with the same key", async () => {
      const { ledger, run, second } = await uncertainRun();
      await second.resume(run.id, { resolve: { action: "retry" }, actor: "dana" });
      const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done.status).toBe("completed");
      expect(ledger.keysOf("charge")).toEqual([`${run.id}:1`, `${run.id}:1`]);
      expect(ledger.executionsOf("receipt")).toBe(1);
    });

    it("resolve skip records the call as skipped and goes on", async () => {
      const { ledger, run, second } = await uncertainRun();
      await second.resume(run.id, { resolve: { action: "skip" }, actor: "dana" });
      const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done.status).toBe("completed");
      expect(ledger.executionsOf("charge")).toBe(1);
      expect((await second.state(run.id)).messages[0]).toMatchObject({ role: "tool", toolName: "charge", isError: true, content: { error: "skipped" } });
      const journal = await journalOf(second, run.id);
      expect(journal.find((e) => e.type === "call.resolved")).toMatchObject({ callSeq: 1, data: { decision: "skip", actor: "dana" } });
      expect(await second.effects(run.id)).toEqual([]);
    });

    it("resolve done takes the person's result as the call's", async () => {
      const { ledger, run, second } = await uncertainRun();
      await second.resume(run.id, { resolve: { action: "done", result: { id: "order-1", key: "from-the-bank" } }, actor: "dana" });
      const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done.status).toBe("completed");
      expect(ledger.executionsOf("charge")).toBe(1);
      expect((await second.state(run.id)).messages[0]).toMatchObject({ role: "tool", content: { id: "order-1", key: "from-the-bank" } });
      expect((await second.effects(run.id)).map((e) => [e.callSeq, e.state, e.result])).toEqual([[1, "done", { id: "order-1", key: "from-the-bank" }]]);
    });

    it("a decision is explicit and final: done needs a result or noResult, and a second decision is refused", async () => {
      const { ledger, run, second } = await uncertainRun();
      await expect(second.resume(run.id, { resolve: { action: "done" }, actor: "dana" })).rejects.toMatchObject({ code: "invalid_input", message: expect.stringContaining("noResult") });
      expect((await second.get(run.id)).status).toBe("paused");
      await second.resume(run.id, { resolve: { action: "done", noResult: true }, actor: "dana" });
      await expect(second.resume(run.id, { resolve: { action: "retry" }, actor: "erin" })).rejects.toMatchObject({ code: "already_decided", message: expect.stringContaining("by dana") });
      const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done.status).toBe("completed");
      // Carried out: still final.
      await expect(second.resume(run.id, { resolve: { action: "skip" }, actor: "erin" })).rejects.toMatchObject({ code: "already_decided" });
      expect(ledger.executionsOf("charge")).toBe(1);
      expect((await journalOf(second, run.id)).filter((e) => e.type === "call.resolved").map((e) => [e.data.decision, e.data.actor])).toEqual([["done", "dana"]]);
    });

    it("cancelled, it is reported uncertain, never hidden", async () => {
      const { run, second } = await uncertainRun();
      await second.cancel(run.id);
      const done = await second.waitFor(run.id, ["cancelled"]);
      expect(done.report?.uncertain).toEqual([{ callSeq: 1, tool: "charge", reason: "uncertain_effect" }]);
    });
  });

  it("takes a check that throws as no answer: the call is uncertain and the run pauses, it does not fail", async () => {
    const ledger = new Ledger();
    const charge = effectTool({ name: "charge", ledger, afterEffect: holdFirst });
    const broken = { ...charge, check: () => Promise.reject(new Error("bank API down")) };
    h = harness([sequenceAgent({ name: "payer", tools: [broken], steps: [{ tool: "charge", input: { id: "order-1" } }] })]);
    const run = await h.runtime.start("payer", null);
    await waitUntil(() => ledger.executionsOf("charge") === 1);
    await h.runtime.close();
    const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10 });
    second.startWorker();
    const paused = await second.waitFor(run.id, ["paused", "failed", "completed"]);
    expect(paused).toMatchObject({ status: "paused", statusReason: "uncertain_effect" });
    const uncertain = (await journalOf(second, run.id)).find((e) => e.type === "call.uncertain");
    expect(String(uncertain?.data.reason)).toContain("bank API down");
  });

  it("reports an idempotent tool in flight when a cancel took the run over as uncertain, saying why", async () => {
    const { run, second } = await crashDuringCharge({ idempotent: true, afterEffect: holdFirst });
    await second.cancel(run.id);
    const done = await second.waitFor(run.id, ["cancelled"]);
    expect(done.report?.uncertain).toEqual([{ callSeq: 1, tool: "charge", reason: "uncertain_effect" }]);
    const uncertain = (await journalOf(second, run.id)).find((e) => e.type === "call.uncertain");
    expect(String(uncertain?.data.reason)).toContain("cancel");
    expect(String(uncertain?.data.reason)).not.toContain("neither idempotent");
  });

  it("does not count the time the run sat orphaned as running time", async () => {
    const { run, second } = await crashDuringCharge({ idempotent: true, afterEffect: holdFirst });
    second.startWorker();
    const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    // The second worker's clock is a minute ahead; at most the dead worker's lease (5 s) is counted.
    expect(done.activeMs).toBeLessThan(10_000);
  });

  it("re-issues an interrupted model call", async () => {
    const agent = toolLoopAgent({ name: "writer", model: "simulated:sim-1?seed=3&tps=200" });
    h = harness([agent]);
    const first = h.runtime;
    const run = await first.start("writer", "write a haiku");
    await waitUntil(async () => (await journalOf(first, run.id)).some((e) => e.type === "call.started"));
    const before = await first.get(run.id);
    await first.close();
    expect(await first.get(run.id)).toEqual(before);
    const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10 });
    second.startWorker();
    const done = await second.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    const journal = await journalOf(second, run.id);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 1, data: { kind: "model", reason: "worker_lost" } });
    expect(journal.filter((e) => e.type === "call.completed").map((e) => e.callSeq)).toEqual([2]);
  });

  it("continues a cancel interrupted mid-compensation, with the same compensation key", async () => {
    const ledger = new Ledger();
    const agent = sequenceAgent({
      name: "publisher",
      tools: [
        effectTool({ name: "publish", ledger, compensable: true, beforeCompensate: (_key, attempt) => (attempt === 1 ? never : undefined) }),
        effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true }),
      ],
      steps: [
        { tool: "publish", input: { id: "a" } },
        { tool: "wait", input: { id: "b" } },
      ],
    });
    h = harness([agent], { compensation: { backoffMs: 1 } });
    const first = h.runtime;
    const run = await first.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await first.cancel(run.id);
    await waitUntil(async () => (await journalOf(first, run.id)).some((e) => e.type === "compensation.started"));
    await first.close();
    expect((await first.get(run.id)).status).toBe("cancelling");

    const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10, compensation: { backoffMs: 1 } });
    second.startWorker();
    const done = await second.waitFor(run.id, ["cancelled"]);
    expect(done.report?.compensated).toEqual([{ callSeq: 1, tool: "publish" }]);
    expect(ledger.compensations.map((c) => [c.key, c.attempt])).toEqual([[`${run.id}:1:compensate`, 2]]);
    const journal = await journalOf(second, run.id);
    expect(journal.filter((e) => e.type.startsWith("compensation.")).map((e) => [e.type, e.data.attempt ?? e.data.attempts])).toEqual([
      ["compensation.started", 1],
      ["compensation.started", 2],
      ["compensation.succeeded", 2],
    ]);
  });

  it("reports a compensation interrupted in its last attempt as failed, saying so", async () => {
    const ledger = new Ledger();
    const agent = sequenceAgent({
      name: "publisher",
      tools: [
        effectTool({ name: "publish", ledger, compensable: true, beforeCompensate: () => never }),
        effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true }),
      ],
      steps: [
        { tool: "publish", input: { id: "a" } },
        { tool: "wait", input: { id: "b" } },
      ],
    });
    h = harness([agent], { compensation: { maxAttempts: 1 } });
    const first = h.runtime;
    const run = await first.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await first.cancel(run.id);
    await waitUntil(async () => (await journalOf(first, run.id)).some((e) => e.type === "compensation.started"));
    await first.close();

    const second = h.open({ clock: new TestClock(60_000), workerPollMs: 10, compensation: { maxAttempts: 1 } });
    second.startWorker();
    const done = await second.waitFor(run.id, ["cancelled"]);
    expect(done.report?.failed).toHaveLength(1);
    expect(done.report?.failed[0]).toMatchObject({ callSeq: 1, tool: "publish" });
    expect(done.report?.failed[0].error).toMatch(/interrupted/);
    const failed = (await journalOf(second, run.id)).find((e) => e.type === "compensation.failed");
    expect(failed?.data).toMatchObject({ final: true, attempts: 1 });
  });
});
