import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { loggedResource } from "../testing/logged-resource.js";
import { TetherError } from "./errors.js";
import type { RunEvent } from "./events.js";
import { resource, type AnyResource } from "./resource.js";
import type { JournalEntry } from "./store.js";
import { tool } from "./tool.js";

const search = tool({
  name: "search",
  description: "Search the corpus",
  input: z.object({ query: z.string() }),
  execute: ({ query }) => ({ hits: [`result for ${query}`] }),
});
const researcher = toolLoopAgent({ name: "researcher", tools: [search] });
const slowModel = "simulated:sim-1?seed=7&tps=200";
const instantModel = "simulated:sim-1?seed=7&tps=Infinity";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

async function journalOf(id: string): Promise<JournalEntry[]> {
  return h!.runtime.journal(id, { limit: 100_000 });
}

function indexOf(journal: JournalEntry[], predicate: (e: JournalEntry) => boolean, from = 0): number {
  return journal.findIndex((e, i) => i >= from && predicate(e));
}

const isStatus = (to: string) => (e: JournalEntry) => e.type === "status" && e.data.to === to;

describe("pause during a streaming model call", () => {
  it("stops the stream at once, bills the streamed tokens, and resumes to the same result as an uninterrupted run", async () => {
    h = harness([researcher]);
    const rt = h.runtime;
    const reference = await rt.start("researcher", "find the trend", { model: instantModel });
    const referenceDone = await rt.waitFor(reference.id, ["completed"]);

    const run = await rt.start("researcher", "find the trend", { model: slowModel });
    const events: { event: RunEvent; status: string | undefined }[] = [];
    let pausedSeen = false;
    const unsubscribe = rt.subscribe(run.id, {}, (event) => {
      if (event.kind === "journal" && event.entry.type === "status" && event.entry.data.to === "paused") pausedSeen = true;
      events.push({ event, status: pausedSeen ? "paused" : undefined });
    });
    await waitUntil(() => events.some((e) => e.event.kind === "live"), { what: "the first model delta" });
    await rt.pause(run.id, { actor: "alice", reason: "let me look" });
    const paused = await rt.waitFor(run.id, ["paused"]);
    await rt.settled(run.id);
    // The model streams a token every 5 ms: 100 ms of silence shows the stream really stopped.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(events.filter((e) => e.status === "paused" && e.event.kind === "live")).toEqual([]);

    const journal = await journalOf(run.id);
    const control = indexOf(journal, (e) => e.type === "control" && e.data.command === "pause");
    expect(journal[control].data).toMatchObject({ actor: "alice", reason: "let me look", outcome: "requested", mode: "immediate" });
    expect(indexOf(journal, (e) => e.type === "call.started", control)).toBe(-1);
    const aborted = journal.find((e) => e.type === "call.aborted")!;
    expect(aborted.data).toMatchObject({ kind: "model", reason: "pause" });
    const abortedUsage = aborted.data.usage as { inputTokens: number; outputTokens: number };
    expect(abortedUsage.outputTokens).toBeGreaterThan(0);
    expect(paused.usage).toMatchObject({ inputTokens: abortedUsage.inputTokens, outputTokens: abortedUsage.outputTokens });
    expect(paused.usage.costUsd).toBeGreaterThan(0);
    expect(paused).toMatchObject({ status: "paused", statusReason: "let me look", inflight: null, lease: null, step: 0 });
    expect((await rt.commands(run.id)).map((c) => [c.type, c.outcome])).toEqual([["pause", "applied"]]);

    await rt.resume(run.id, { actor: "alice" });
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    unsubscribe();
    expect(done.status).toBe("completed");
    expect(done.output).toEqual(referenceDone.output);
    expect((await rt.state(run.id)).messages).toEqual((await rt.state(reference.id)).messages);
    expect(done.usage.outputTokens).toBe(referenceDone.usage.outputTokens + abortedUsage.outputTokens);
    expect(done.usage.inputTokens).toBe(referenceDone.usage.inputTokens + abortedUsage.inputTokens);
  });

  it("with mode boundary lets the call finish and journals its result", async () => {
    h = harness([researcher]);
    const rt = h.runtime;
    const run = await rt.start("researcher", "find the trend", { model: slowModel });
    await waitUntil(async () => (await journalOf(run.id)).some((e) => e.type === "call.started"));
    await rt.pause(run.id, { mode: "boundary" });
    const pausing = await rt.waitFor(run.id, (r) => r.status !== "running");
    // The call is still streaming (a slow model), so the run waits for it, and says so.
    expect(pausing.status).toBe("pausing");
    expect(pausing.waitingFor).toMatchObject({ kind: "model", callSeq: 1 });
    const paused = await rt.waitFor(run.id, ["paused"]);
    const journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "call.aborted")).toEqual([]);
    const completed = indexOf(journal, (e) => e.type === "call.completed" && e.callSeq === 1);
    expect(completed).toBeGreaterThan(indexOf(journal, (e) => e.type === "control"));
    expect(completed).toBeLessThan(indexOf(journal, isStatus("paused")));
    expect(paused).toMatchObject({ step: 1, waitingFor: null });
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
  });
});

describe("pause during a tool call", () => {
  it("waits for a non-abortable tool, journals its result, and never runs it again", async () => {
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 200 });
    const quick = effectTool({ name: "quick", ledger });
    const agent = sequenceAgent({ name: "steps", tools: [slow, quick], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "quick", input: { id: "b" } }] });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    const pausing = await rt.pause(run.id);
    expect(pausing.status).toBe("pausing");
    const waiting = await rt.waitFor(run.id, (r) => r.status !== "pausing" || r.waitingFor !== null);
    expect(waiting).toMatchObject({ status: "pausing", waitingFor: { kind: "tool", name: "slow", callSeq: 1 } });
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused).toMatchObject({ step: 1, inflight: null, waitingFor: null });
    const journal = await journalOf(run.id);
    const completed = indexOf(journal, (e) => e.type === "call.completed" && e.callSeq === 1);
    expect(completed).toBeGreaterThan(indexOf(journal, (e) => e.type === "control"));
    expect(completed).toBeLessThan(indexOf(journal, isStatus("paused")));
    expect(ledger.executionsOf("quick")).toBe(0);

    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done).toMatchObject({ status: "completed", output: 2 });
    expect(ledger.executionsOf("slow")).toBe(1);
    expect(ledger.executionsOf("quick")).toBe(1);
  });

  it("aborts an abortable tool at once and issues it again on resume", async () => {
    const ledger = new Ledger();
    const fetcher = effectTool({ name: "fetch", ledger, durationMs: 300, abortable: true });
    const agent = sequenceAgent({ name: "fetcher", tools: [fetcher], steps: [{ tool: "fetch", input: { id: "page" } }] });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("fetcher", null);
    await waitUntil(() => ledger.executionsOf("fetch") === 1);
    await rt.pause(run.id);
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(paused).toMatchObject({ step: 0, inflight: null });
    const journal = await journalOf(run.id);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 1, data: { kind: "tool", name: "fetch", reason: "pause" } });
    expect(journal.some((e) => e.type === "call.completed")).toBe(false);

    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("fetch")).toBe(2);
    const after = await journalOf(run.id);
    expect(after.filter((e) => e.type === "call.started").map((e) => e.callSeq)).toEqual([1, 2]);
    expect(after.find((e) => e.type === "call.completed")?.callSeq).toBe(2);
    // The key belongs to the call, not to the attempt: the ledger saw the same key twice.
    expect(ledger.keysOf("fetch")).toEqual([`${run.id}:1`, `${run.id}:1`]);
    expect(after.filter((e) => e.type === "call.started").map((e) => [e.data.key, e.data.reissueOf])).toEqual([
      [`${run.id}:1`, undefined],
      [`${run.id}:1`, 1],
    ]);
  });

  it("an aborted call the agent does not make again lends its key to no other call", async () => {
    const ledger = new Ledger();
    const fetcher = effectTool({ name: "fetch", ledger, durationMs: 300, abortable: true });
    const agent = sequenceAgent({ name: "changer", tools: [fetcher], steps: [{ tool: "fetch", input: { id: "page" } }, { tool: "fetch", input: { id: "other" } }] });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("changer", null);
    await waitUntil(() => ledger.executionsOf("fetch") === 1);
    await rt.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    // A person steers the agent past the aborted call: the next call is another one, with a key of its own.
    await rt.editState(run.id, { patch: { vars: { index: 1 } } });
    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const keys = ledger.executions.map((e) => [e.input, e.key]);
    expect(keys[0]).toEqual([{ id: "page" }, `${run.id}:1`]);
    expect(keys.slice(1).every(([, key]) => key !== `${run.id}:1`)).toBe(true);
    expect((await rt.get(run.id)).reissue ?? null).toBeNull();
  });
});

describe("how many writes a pause costs", () => {
  async function pauseMidStream(agent: ReturnType<typeof toolLoopAgent>) {
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start(agent.name, "find the trend", { model: slowModel });
    let streaming = false;
    const unsubscribe = rt.subscribe(run.id, {}, (event) => {
      if (event.kind === "live") streaming = true;
    });
    await waitUntil(() => streaming, { what: "the first model delta" });
    const pausing = await rt.pause(run.id, { reason: "look" });
    const paused = await rt.waitFor(run.id, ["paused"]);
    unsubscribe();
    const journal = await journalOf(run.id);
    // The pause's own write journals its command and running → pausing.
    const pausingAt = indexOf(journal, isStatus("pausing"), indexOf(journal, (e) => e.type === "control" && e.data.command === "pause"));
    return { pausing, paused, after: journal.slice(pausingAt + 1) };
  }

  it("stops the last call in flight and finishes the pause in one write: the call's abort and pausing → paused together", async () => {
    const { pausing, paused, after } = await pauseMidStream(researcher);
    expect(pausing.status).toBe("pausing");
    expect(after.map((e) => [e.type, e.data.kind ?? e.data.to])).toEqual([
      ["call.aborted", "model"],
      ["status", "paused"],
    ]);
    // One write after the pause's own: the record's version moved by one.
    expect(paused.version).toBe(pausing.version + 1);
    expect(paused).toMatchObject({ status: "paused", statusReason: "look", inflight: null, waitingFor: null, lease: null, pauseMode: null, runningSince: null });
    expect((await h!.runtime.commands(paused.id)).map((c) => [c.type, c.outcome])).toEqual([["pause", "applied"]]);
    await h!.runtime.resume(paused.id);
    expect((await h!.runtime.waitFor(paused.id, ["completed", "failed"])).status).toBe("completed");
  });

  it("finishes a pause that waited for a call in the write of the call's outcome", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const ledger = new Ledger();
    const work = effectTool({ name: "work", ledger, afterEffect: () => held });
    h = harness([sequenceAgent({ name: "holder", tools: [work], steps: [{ tool: "work", input: { id: "w1" } }, { tool: "work", input: { id: "w2" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("holder", null);
    await waitUntil(() => ledger.executionsOf("work") === 1, { what: "the first call" });
    const pausing = await rt.pause(run.id, { reason: "look" });
    // The pause waits for the call, and says so (waitingFor, one write); then the call ends.
    await rt.waitFor(run.id, (r) => r.waitingFor !== null);
    release();
    const paused = await rt.waitFor(run.id, ["paused"]);
    const journal = await journalOf(run.id);
    const pausingAt = indexOf(journal, isStatus("pausing"));
    expect(journal.slice(pausingAt + 1).map((e) => [e.type, e.data.name ?? e.data.to])).toEqual([
      ["call.completed", "work"],
      ["status", "paused"],
    ]);
    // waitingFor, then the outcome and pausing → paused in one write.
    expect(paused.version).toBe(pausing.version + 2);
    expect(paused).toMatchObject({ status: "paused", statusReason: "look", inflight: null, waitingFor: null, lease: null, step: 1 });
    expect((await rt.commands(run.id)).map((c) => [c.type, c.outcome])).toEqual([["pause", "applied"]]);
    expect(ledger.executionsOf("work")).toBe(1);
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(ledger.keysOf("work")).toHaveLength(2);
  });

  it("journals the abort, releases what pauses release, then finishes the pause, when a resource is released on pause", async () => {
    const released: string[] = [];
    const browser = resource({
      name: "browser",
      releaseOnPause: true,
      acquire: () => "tab",
      release: (handle) => {
        released.push(String(handle));
      },
    });
    const { pausing, paused, after } = await pauseMidStream(toolLoopAgent({ name: "browsing", tools: [search], resources: [browser] }));
    expect(released).toEqual(["tab"]);
    expect(after.map((e) => [e.type, e.data.kind ?? e.data.name ?? e.data.to])).toEqual([
      ["call.aborted", "model"],
      ["resource.released", "browser"],
      ["status", "paused"],
    ]);
    expect(paused.version).toBe(pausing.version + 3);
    expect(paused.resources.browser).toMatchObject({ releasedForPause: true });
  });
});

/**
 * A run of `calls` slow steps holding `lock`, paused by the harness's first runtime after its first
 * call; that runtime then takes no more runs (it stays open). With a second runtime on the store.
 */
async function pausedHoldingLock(lock: AnyResource, calls: number, leaseMs: number) {
  const ledger = new Ledger();
  const slow = effectTool({ name: "slow", ledger, durationMs: 150 });
  const steps = ["a", "b", "c"].slice(0, calls).map((id) => ({ tool: "slow", input: { id } }));
  h = harness([sequenceAgent({ name: "locking", tools: [slow], resources: [lock], steps })], { leaseMs });
  const first = h.runtime;
  const run = await first.start("locking", null);
  await waitUntil(() => ledger.executionsOf("slow") === 1);
  await first.pause(run.id);
  await first.waitFor(run.id, ["paused"]);
  first.stopWorker();
  return { ledger, first, other: h.open({ leaseMs }), run };
}

describe("resources and pause", () => {
  it("releases releaseOnPause resources on pause and acquires them again on resume", async () => {
    const ledger = new Ledger();
    const calls: string[] = [];
    let browsers = 0;
    const browser = resource({
      name: "browser",
      releaseOnPause: true,
      acquire: ({ previous }) => {
        // Released on pause: a resume launches a new one, with nothing to re-attach to.
        calls.push(previous ? `reattach browser ${JSON.stringify(previous)}` : "acquire browser");
        return { id: ++browsers };
      },
      record: (handle: { id: number }) => ({ id: handle.id }),
      release: (handle) => {
        calls.push(`release browser ${handle?.id}`);
      },
    });
    const lock = resource({
      name: "lock",
      acquire: ({ previous }) => {
        calls.push(previous ? "reattach lock" : "acquire lock");
        return "lock";
      },
      record: () => ({ path: "/tmp/work.lock" }),
      release: () => {
        calls.push("release lock");
      },
    });
    const slow = effectTool({ name: "slow", ledger, durationMs: 150 });
    const agent = sequenceAgent({ name: "browsing", tools: [slow], resources: [lock, browser], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "slow", input: { id: "b" } }] });
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("browsing", null);
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    await rt.pause(run.id);
    const paused = await rt.waitFor(run.id, ["paused"]);
    expect(calls).toEqual(["acquire lock", "acquire browser", "release browser 1"]);
    expect(paused.resources.browser).toMatchObject({ releasedForPause: true });
    expect(paused.resources.lock.releasedForPause).toBeUndefined();
    let journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type.startsWith("resource.")).map((e) => [e.type, e.data.name, e.data.forPause ?? e.data.reacquired])).toEqual([
      ["resource.acquired", "lock", false],
      ["resource.acquired", "browser", false],
      ["resource.released", "browser", true],
    ]);

    await rt.resume(run.id);
    const done = await rt.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.resources).toEqual({});
    // The lock was kept over the pause and this process still holds it: it is not acquired twice.
    expect(calls).toEqual(["acquire lock", "acquire browser", "release browser 1", "acquire browser", "release browser 2", "release lock"]);
    journal = await journalOf(run.id);
    const resumed = indexOf(journal, isStatus("running"), indexOf(journal, isStatus("paused")));
    expect(journal.slice(resumed).filter((e) => e.type === "resource.acquired").map((e) => [e.data.name, e.data.reacquired])).toEqual([["browser", true]]);
  });

  it("re-attaches a resource kept over a pause when a second runtime on its own connection resumes the run", async () => {
    const calls: string[] = [];
    const lock = resource({
      name: "lock",
      acquire: ({ previous }) => {
        calls.push(previous ? `reattach ${JSON.stringify(previous)}` : "acquire");
        return "lock";
      },
      record: () => ({ path: "/tmp/work.lock" }),
      release: (handle, record) => {
        calls.push(`release ${handle ?? "no handle"} ${JSON.stringify(record)}`);
      },
      abandon: (handle) => {
        calls.push(`abandon ${handle}`);
      },
    });
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 150 });
    const agent = sequenceAgent({ name: "locking", tools: [slow], resources: [lock], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "slow", input: { id: "b" } }] });
    h = harness([agent]);
    const run = await h.runtime.start("locking", null);
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    await h.runtime.pause(run.id);
    await h.runtime.waitFor(run.id, ["paused"]);
    // Closing lets go of the live handle, never of the lock its record names: the next holder takes that over.
    await h.runtime.close();
    expect(calls).toEqual(["acquire", "abandon lock"]);
    const other = h.open();
    await other.resume(run.id);
    expect((await other.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(calls).toEqual(["acquire", "abandon lock", 'reattach {"path":"/tmp/work.lock"}', 'release lock {"path":"/tmp/work.lock"}']);
  });

  it("a handle kept over a pause is not reused once another runtime held the run in between: abandoned, and the record as it is now re-attached", async () => {
    const calls: string[] = [];
    const { ledger, first: a, other: b, run } = await pausedHoldingLock(loggedResource("lock", calls), 3, 60_000);
    await b.resume(run.id);
    await waitUntil(() => ledger.executionsOf("slow") === 2);
    await b.pause(run.id);
    await b.waitFor(run.id, ["paused"]);
    // Back on the first runtime, well within a lease (no sweep yet): its handle is not the run's any more.
    await a.resume(run.id);
    expect((await a.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(calls).toEqual([
      "acquire handle-1",
      'reattach handle-2 (was {"session":"handle-1"})',
      "abandon handle-1",
      'reattach handle-3 (was {"session":"handle-2"})',
      'release handle-3 {"session":"handle-3"}',
    ]);
    await b.close();
    expect(calls.at(-1)).toBe("abandon handle-2");
  });

  it("a handle kept over a pause is abandoned, not released, once another runtime resumes the run; the runtime that kept it stays up", async () => {
    const calls: string[] = [];
    // The first runtime stays open but takes no more runs; another resumes the run and finishes it.
    const { other, run } = await pausedHoldingLock(loggedResource("lock", calls), 2, 1_000);
    await other.resume(run.id);
    expect((await other.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    // Within a lease of the takeover, the first runtime lets its handle go, and releases nothing.
    await waitUntil(() => calls.includes("abandon handle-1"), { timeoutMs: 5_000, what: "the kept handle let go" });
    // The takeover and the sweep run side by side: their order is free, each happens once.
    expect(calls[0]).toBe("acquire handle-1");
    expect([...calls].sort()).toEqual(["abandon handle-1", "acquire handle-1", 'reattach handle-2 (was {"session":"handle-1"})', 'release handle-2 {"session":"handle-2"}']);
    await other.close();
  });
});

describe("pause and resume as commands", () => {
  it("pausing a paused run succeeds, changes nothing, and is journaled as already_holds", async () => {
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 100, abortable: true });
    h = harness([sequenceAgent({ name: "steps", tools: [slow], steps: [{ tool: "slow", input: { id: "a" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    await rt.pause(run.id, { actor: "alice" });
    const paused = await rt.waitFor(run.id, ["paused"]);
    const again = await rt.pause(run.id, { actor: "bob", reason: "twice" });
    expect(again).toMatchObject({ status: "paused", statusReason: paused.statusReason, step: paused.step });
    const journal = await journalOf(run.id);
    expect(journal[journal.length - 1]).toMatchObject({ type: "control", data: { command: "pause", actor: "bob", reason: "twice", outcome: "already_holds" } });
    expect((await rt.commands(run.id)).map((c) => [c.actor, c.outcome])).toEqual([
      ["alice", "applied"],
      ["bob", "already_holds"],
    ]);
  });

  it("refuses to resume a cancelled run with illegal_transition naming its status", async () => {
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 5_000, abortable: true });
    h = harness([sequenceAgent({ name: "steps", tools: [slow], steps: [{ tool: "slow", input: { id: "a" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    await rt.cancel(run.id);
    await rt.waitFor(run.id, ["cancelled"]);
    const error = await rt.resume(run.id).catch((e: unknown) => e);
    expect(TetherError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ name: "IllegalTransitionError", code: "illegal_transition", details: { currentStatus: "cancelled", command: "resume" } });
    expect((error as Error).message).toContain("cancelled");
    const journal = await journalOf(run.id);
    expect(journal[journal.length - 1]).toMatchObject({ type: "control", data: { command: "resume", outcome: "refused: illegal_transition" } });
  });
});

describe("pause racing the executor", () => {
  it("continues a run resumed the moment its pause lands, while its executor is still winding down", async () => {
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 50 });
    h = harness([sequenceAgent({ name: "steps", tools: [slow], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "slow", input: { id: "b" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    let resumed: Promise<unknown> | undefined;
    const unsubscribe = rt.bus.subscribe(run.id, (event) => {
      if (event.kind === "journal" && event.entry.type === "status" && event.entry.data.to === "paused") resumed ??= rt.resume(run.id);
    });
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    await rt.pause(run.id);
    await waitUntil(() => resumed);
    await resumed;
    unsubscribe();
    const done = await rt.waitFor(run.id, ["completed", "failed"], { timeoutMs: 5_000 });
    expect(done).toMatchObject({ status: "completed", output: 2 });
    expect(ledger.executionsOf("slow")).toBe(2);
  });

  it("aborts an abortable tool that keeps writing progress when a second runtime on its own connection pauses the run", async () => {
    const progressing = tool({
      name: "crawl",
      description: "Crawls for a while, reporting progress",
      input: z.object({}),
      abortable: true,
      async execute(_input, ctx) {
        for (let i = 0; i < 1_000; i++) {
          if (ctx.signal.aborted) throw ctx.signal.reason;
          ctx.progress({ progress: i, total: 1_000 });
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        return "crawled";
      },
    });
    h = harness([sequenceAgent({ name: "crawler", tools: [progressing], steps: [{ tool: "crawl", input: {} }] })]);
    const rt = h.runtime;
    const other = h.open({ worker: false });
    const run = await rt.start("crawler", null);
    await waitUntil(async () => (await journalOf(run.id)).some((e) => e.type === "call.progress"));
    await other.pause(run.id, { actor: "bob" });
    const paused = await rt.waitFor(run.id, ["paused"], { timeoutMs: 1_000 });
    expect(paused.step).toBe(0);
    const journal = await journalOf(run.id);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ data: { name: "crawl", reason: "pause" } });
  });
});
