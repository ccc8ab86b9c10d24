import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { eventId, type RunEvent } from "./events.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

function journalSeqs(events: RunEvent[]): number[] {
  return events.filter((e) => e.kind === "journal").map((e) => e.seq);
}

describe("subscribe", () => {
  it("replays the journal from an offset, then continues live, with no gap and no duplicate", async () => {
    const ledger = new Ledger();
    const steps = Array.from({ length: 4 }, (_, i) => ({ tool: "work", input: { id: `w${i}` } }));
    h = harness([sequenceAgent({ name: "worker", tools: [effectTool({ name: "work", ledger, durationMs: 20 })], steps })]);
    const rt = h.runtime;
    const run = await rt.start("worker", null);
    await waitUntil(() => ledger.executionsOf("work") === 2);
    const fromStart: RunEvent[] = [];
    const fromFour: RunEvent[] = [];
    const stopA = rt.subscribe(run.id, {}, (e) => fromStart.push(e));
    const stopB = rt.subscribe(run.id, { afterSeq: 4 }, (e) => fromFour.push(e));
    await rt.waitFor(run.id, ["completed"]);
    const total = (await rt.journal(run.id)).length;
    await waitUntil(() => journalSeqs(fromStart).length === total && journalSeqs(fromFour).length === total - 4);
    stopA();
    stopB();
    expect(journalSeqs(fromStart)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(journalSeqs(fromFour)).toEqual(Array.from({ length: total - 4 }, (_, i) => i + 5));
  });

  it("misses nothing a second runtime on its own connection (as another process would) writes while this one executes the run", async () => {
    h = harness([toolLoopAgent({ name: "writer", model: "simulated:sim-1?seed=1&tps=200" })]);
    const rt = h.runtime;
    const other = h.open({ worker: false });
    const run = await rt.start("writer", "an essay");
    const events: RunEvent[] = [];
    const stop = rt.subscribe(run.id, {}, (e) => events.push(e));
    await waitUntil(() => events.some((e) => e.kind === "live"));
    await other.pause(run.id, { actor: "remote" });
    await rt.waitFor(run.id, ["paused"]);
    const total = (await rt.journal(run.id)).length;
    await waitUntil(() => journalSeqs(events).length >= total, { timeoutMs: 2_000, what: `all ${total} entries (got ${journalSeqs(events).join(",")})` });
    stop();
    expect(journalSeqs(events)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    const ids = events.map(eventId);
    expect(new Set(ids).size).toBe(ids.length);
    const control = events.find((e) => e.kind === "journal" && e.entry.type === "control");
    expect(control).toMatchObject({ entry: { data: { actor: "remote" } } });
    // Live deltas are numbered after the entry they follow and never come after a later entry.
    let lastSeq = 0;
    for (const event of events) {
      expect(event.seq).toBeGreaterThanOrEqual(lastSeq);
      lastSeq = event.seq;
    }
  });

  it("keeps streaming model deltas after a boundary pause from a second runtime on its own connection, numbered after its entries", async () => {
    h = harness([toolLoopAgent({ name: "writer", model: "simulated:sim-1?seed=1&tps=200" })]);
    const rt = h.runtime;
    const other = h.open({ worker: false });
    const run = await rt.start("writer", "an essay");
    const events: RunEvent[] = [];
    const stop = rt.subscribe(run.id, {}, (e) => events.push(e));
    await waitUntil(() => events.some((e) => e.kind === "live"));
    await other.pause(run.id, { mode: "boundary" });
    await rt.waitFor(run.id, ["paused"]);
    await waitUntil(() => events.some((e) => e.kind === "journal" && e.entry.type === "status" && e.entry.data.to === "paused"));
    stop();
    const pausing = events.find((e) => e.kind === "journal" && e.entry.type === "status" && e.entry.data.to === "pausing")!;
    const completed = events.find((e) => e.kind === "journal" && e.entry.type === "call.completed")!;
    const between = events.slice(events.indexOf(pausing) + 1, events.indexOf(completed));
    expect(between.filter((e) => e.kind === "live").length).toBeGreaterThan(0);
    for (const event of between) expect(event.seq).toBe(pausing.seq);
  });
});

describe("waitFor", () => {
  it("follows a run executed here on its executor's record: a store read to start, none a step, and a copy the caller may change", async () => {
    const ledger = new Ledger();
    const steps = Array.from({ length: 30 }, (_, i) => ({ tool: "work", input: { id: `w${i}` } }));
    h = harness([sequenceAgent({ name: "worker", tools: [effectTool({ name: "work", ledger })], steps })]);
    const rt = h.runtime;
    let reads = 0;
    const getRun = h.store.getRun.bind(h.store);
    h.store.getRun = async (runId) => (reads++, getRun(runId));
    const run = await rt.start("worker", null);
    const done = await rt.waitFor(run.id, ["completed"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("work")).toBe(30);
    // 30 steps, each a journal entry or more, take well under the 250 ms between polls.
    expect(reads).toBeLessThanOrEqual(3);
    const stored = await rt.get(run.id);
    expect(done).toEqual(stored);
    done.output = "changed by the caller";
    expect((await rt.get(run.id)).output).toEqual(stored.output);
  });

  it("sees a pause written by a command here, whose entry is published before the executor hears of it", async () => {
    const ledger = new Ledger();
    h = harness([sequenceAgent({ name: "worker", tools: [effectTool({ name: "work", ledger, durationMs: 5_000, abortable: true })], steps: [{ tool: "work", input: { id: "w" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("worker", null);
    await waitUntil(() => ledger.executionsOf("work") === 1, { what: "the call" });
    const waiting = rt.waitFor(run.id, ["pausing", "paused"], { timeoutMs: 5_000 });
    await rt.pause(run.id);
    expect((await waiting).status).toMatch(/^paus/);
  });
});
