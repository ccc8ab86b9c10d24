import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, TestClock, waitUntil, type Harness } from "../testing/index.js";
import type { Json } from "./json.js";
import { resource } from "./resource.js";
import type { JournalEntry } from "./store.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

function setup(steps: { tool: string; input: Json }[], options: { failingFlaky?: number } = {}) {
  const ledger = new Ledger();
  const released: string[] = [];
  const lock = resource({ name: "lock", acquire: () => "held", record: () => ({ path: "/locks/a" }), release: () => void released.push("lock") });
  const tools = [
    effectTool({ name: "publish", ledger, compensable: true }),
    effectTool({ name: "email", ledger, compensable: true }),
    effectTool({ name: "note", ledger }),
    effectTool({ name: "flaky", ledger, compensable: true, failingCompensations: options.failingFlaky ?? Infinity }),
    effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true }),
  ];
  const agent = sequenceAgent({ name: "publisher", tools, resources: [lock], steps });
  return { ledger, released, agent };
}

async function journalOf(id: string): Promise<JournalEntry[]> {
  return h!.runtime.journal(id, { limit: 100_000 });
}

function statuses(journal: JournalEntry[]): string[] {
  return journal.filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}`);
}

describe("cancel", () => {
  it("compensates every completed effect newest first, each once, then releases resources, and reports", async () => {
    const { ledger, released, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "note", input: { id: "b" } },
      { tool: "email", input: { id: "c" } },
      { tool: "publish", input: { id: "d" } },
      { tool: "wait", input: { id: "e" } },
    ]);
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    const cancelling = await rt.cancel(run.id, { actor: "alice", reason: "wrong customer" });
    expect(cancelling.status).toBe("cancelling");
    const done = await rt.waitFor(run.id, ["cancelled"]);

    expect(ledger.compensations.map((c) => [c.tool, c.input.id])).toEqual([
      ["publish", "d"],
      ["email", "c"],
      ["publish", "a"],
    ]);
    for (const key of new Set(ledger.compensations.map((c) => c.key))) expect(ledger.compensations.filter((c) => c.key === key)).toHaveLength(1);
    expect(done.report).toEqual({
      compensated: [
        { callSeq: 4, tool: "publish" },
        { callSeq: 3, tool: "email" },
        { callSeq: 1, tool: "publish" },
      ],
      failed: [],
      uncertain: [],
      released: ["lock"],
      releaseFailed: [],
    });
    expect(released).toEqual(["lock"]);
    expect(done).toMatchObject({ statusReason: "wrong customer", lease: null, resources: {}, inflight: null });
    expect((await rt.effects(run.id)).map((e) => [e.callSeq, e.state, e.attempts])).toEqual([
      [1, "compensated", 1],
      [3, "compensated", 1],
      [4, "compensated", 1],
    ]);

    const journal = await journalOf(run.id);
    expect(statuses(journal)).toEqual(["queued>running", "running>cancelling", "cancelling>cancelled"]);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 5, data: { reason: "cancel" } });
    const lastCompensation = journal.map((e) => e.type).lastIndexOf("compensation.succeeded");
    const release = journal.findIndex((e) => e.type === "resource.released");
    expect(release).toBeGreaterThan(lastCompensation);
    expect(journal.filter((e) => e.type === "compensation.succeeded").map((e) => e.callSeq)).toEqual([4, 3, 1]);
    expect(journal.find((e) => e.type === "control")?.data).toMatchObject({ command: "cancel", actor: "alice", reason: "wrong customer", outcome: "requested" });
    expect((await rt.commands(run.id)).map((c) => [c.type, c.outcome])).toEqual([["cancel", "applied"]]);
  });

  it("retries a failing compensation with backoff up to the bound, then reports it failed", async () => {
    const { ledger, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "flaky", input: { id: "b" } },
      { tool: "publish", input: { id: "c" } },
      { tool: "wait", input: { id: "d" } },
    ]);
    const clock = new TestClock();
    h = harness([agent], { clock, compensation: { maxAttempts: 3, backoffMs: 40 } });
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.cancel(run.id);
    const done = await rt.waitFor(run.id, ["cancelled"]);

    expect(ledger.compensations.map((c) => [c.tool, c.attempt, c.ok])).toEqual([
      ["publish", 1, true],
      ["flaky", 1, false],
      ["flaky", 2, false],
      ["flaky", 3, false],
      ["publish", 1, true],
    ]);
    expect(done.report?.failed).toEqual([{ callSeq: 2, tool: "flaky", error: "flaky could not be undone (attempt 3)" }]);
    expect(done.report?.compensated).toEqual([
      { callSeq: 3, tool: "publish" },
      { callSeq: 1, tool: "publish" },
    ]);
    expect((await rt.effects(run.id)).find((e) => e.callSeq === 2)).toMatchObject({ state: "failed", attempts: 3, error: "flaky could not be undone (attempt 3)" });

    const journal = await journalOf(run.id);
    const flaky = journal.filter((e) => e.callSeq === 2 && e.type.startsWith("compensation."));
    expect(flaky.map((e) => [e.type, e.data.attempt ?? e.data.attempts, e.data.final ?? null])).toEqual([
      ["compensation.started", 1, null],
      ["compensation.failed", 1, false],
      ["compensation.started", 2, null],
      ["compensation.failed", 2, false],
      ["compensation.started", 3, null],
      ["compensation.failed", 3, true],
    ]);
    expect(clock.sleeps).toEqual([40, 80]);
    expect(journal[journal.length - 1]).toMatchObject({ type: "status", data: { to: "cancelled", failed: 1, compensated: 2 } });
  });

  it("compensates a paused run that no worker holds", async () => {
    const { ledger, released, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "wait", input: { id: "b" } },
    ]);
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.pause(run.id);
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused.lease).toBeNull();
    await rt.settled(run.id);
    expect(rt.isExecuting(run.id)).toBe(false);

    await rt.cancel(run.id, { actor: "bob" });
    const done = await rt.waitFor(run.id, ["cancelled"]);
    expect(ledger.compensations.map((c) => [c.tool, c.input.id])).toEqual([["publish", "a"]]);
    expect(done.report).toMatchObject({ compensated: [{ callSeq: 1, tool: "publish" }], failed: [], released: ["lock"] });
    expect(released).toEqual(["lock"]);
    expect(statuses(await journalOf(run.id))).toEqual(["queued>running", "running>pausing", "pausing>paused", "paused>cancelling", "cancelling>cancelled"]);
  });

  it("compensates a paused run cancelled from a control-only process, executed by the worker that polls", async () => {
    const { ledger, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "email", input: { id: "b" } },
      { tool: "wait", input: { id: "c" } },
    ]);
    h = harness([agent], { workerPollMs: 20 });
    const rt = h.runtime;
    const control = h.open({ worker: false });
    rt.startWorker();
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await control.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    await control.cancel(run.id, { actor: "carol" });
    const done = await control.waitFor(run.id, ["cancelled"]);
    expect(ledger.compensations.map((c) => c.tool)).toEqual(["email", "publish"]);
    expect(done.report?.compensated.map((c) => c.callSeq)).toEqual([2, 1]);
    const commands = await control.commands(run.id);
    expect(commands.map((c) => [c.type, c.actor, c.outcome])).toEqual([
      ["pause", "local", "applied"],
      ["cancel", "carol", "applied"],
    ]);
  });

  it("previews a cancel: compensations newest first and the resources to release, changing nothing", async () => {
    const { ledger, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "note", input: { id: "b" } },
      { tool: "email", input: { id: "c" } },
      { tool: "publish", input: { id: "d" } },
      { tool: "wait", input: { id: "e" } },
    ]);
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.pause(run.id);
    const paused = await rt.waitFor(run.id, ["paused"]);
    const preview = await rt.cancelPreview(run.id);
    expect(preview).toEqual({
      runId: run.id,
      status: "paused",
      cancellable: true,
      compensations: [
        { callSeq: 4, tool: "publish", input: { id: "d" } },
        { callSeq: 3, tool: "email", input: { id: "c" } },
        { callSeq: 1, tool: "publish", input: { id: "a" } },
      ],
      resources: ["lock"],
      uncertain: [],
      forks: [],
      inherited: [],
    });
    expect(ledger.compensations).toEqual([]);
    expect(await rt.get(run.id)).toEqual(paused);
  });

  it("bounds each compensation attempt in time: a hanging undo is retried, then reported failed", async () => {
    const ledger = new Ledger();
    const hanging = effectTool({ name: "publish", ledger, compensable: true, beforeCompensate: () => new Promise<void>(() => undefined) });
    const agent = sequenceAgent({
      name: "publisher",
      tools: [hanging, effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true })],
      steps: [
        { tool: "publish", input: { id: "a" } },
        { tool: "wait", input: { id: "b" } },
      ],
    });
    h = harness([agent], { compensation: { maxAttempts: 2, backoffMs: 1, timeoutMs: 50 } });
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.cancel(run.id);
    const waiting = await rt.waitFor(run.id, (r) => r.waitingFor !== null || r.status === "cancelled");
    expect(waiting).toMatchObject({ status: "cancelling", waitingFor: { kind: "compensation", name: "publish", callSeq: 1 } });
    const done = await rt.waitFor(run.id, ["cancelled"]);
    expect(done.waitingFor).toBeNull();
    expect(done.report?.failed).toEqual([{ callSeq: 1, tool: "publish", error: "timed out after 50 ms" }]);
    const journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "compensation.started").map((e) => e.data.attempt)).toEqual([1, 2]);
  });
});

describe("cancel right after a pause", () => {
  it("is carried out by this process even while the pausing executor is still winding down (no worker poll)", async () => {
    const { ledger, agent } = setup([
      { tool: "publish", input: { id: "a" } },
      { tool: "wait", input: { id: "b" } },
    ]);
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    // Cancel the moment `paused` is published: the pausing executor has not returned yet.
    let cancelling: Promise<unknown> | undefined;
    const unsubscribe = rt.bus.subscribe(run.id, (event) => {
      if (!cancelling && event.kind === "journal" && event.entry.type === "status" && event.entry.data.to === "paused") cancelling = rt.cancel(run.id);
    });
    await rt.pause(run.id);
    await waitUntil(() => cancelling !== undefined);
    await cancelling;
    unsubscribe();
    const done = await rt.waitFor(run.id, ["cancelled"], { timeoutMs: 5_000 });
    expect(done.report?.compensated).toEqual([{ callSeq: 1, tool: "publish" }]);
  });
});
