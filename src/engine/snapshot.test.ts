import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { harness, tempSqlite, type Harness, type TempSqlite } from "../testing/index.js";
import { observedStore } from "../testing/observed-store.js";
// The class: these tests read its raw connection, which the public type leaves out.
import type { SqliteStore } from "../stores/sqlite-store.js";
import { rowKey } from "../stores/sqlite-schema.js";
import { defineAgent } from "./agent.js";
import { SnapshotCorruptError } from "./errors.js";
import { emptyChain, extendChain, restoreState, SnapshotWriter } from "./snapshot.js";
import type { RunUpdate, SnapshotWrite } from "./store.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
let sqlite: TempSqlite | undefined;
afterEach(async () => {
  await h?.cleanup();
  await sqlite?.cleanup();
  h = undefined;
  sqlite = undefined;
});

function snapshotBytes(write: SnapshotWrite): number {
  return write.appendMessages.reduce((n, m) => n + m.length, 0) + (write.varsJson?.length ?? 0) + JSON.stringify(write.head).length;
}

/** The store as the engine uses it, counting what it writes and reads. */
function recording(store: SqliteStore) {
  const seen = { snapshotWrites: new Map<number, number>(), journalReads: 0, stateLoads: 0 };
  const observed = observedStore(store, (method, args) => {
    const update = args[0] as RunUpdate;
    if (method === "update" && update.snapshot) seen.snapshotWrites.set(update.snapshot.head.step, snapshotBytes(update.snapshot));
    if (method === "readJournal") seen.journalReads += 1;
    if (method === "loadState") seen.stateLoads += 1;
  });
  return { store: observed, seen };
}

/** One tool call per step, each adding a ~1 KB message; vars change only every 100 steps. */
const note = tool({ name: "note", description: "Writes a note", input: z.object({ n: z.number() }), execute: ({ n }) => ({ n, text: "x".repeat(1_000) }) });
function scribe(total: number) {
  return defineAgent({
    name: "scribe",
    version: "1",
    tools: [note],
    budgets: { maxSteps: 10_000 },
    init: () => ({ messages: [], vars: { phase: 0 } }),
    next: (state) => (state.messages.length < total ? { type: "tool", toolCallId: `c${state.messages.length}`, toolName: "note", input: { n: state.messages.length } } : { type: "done", output: state.messages.length }),
    apply(state, action, outcome) {
      if (action.type !== "tool" || outcome.type !== "tool") return;
      state.messages.push({ role: "tool", toolCallId: action.toolCallId, toolName: "note", content: outcome.ok ? outcome.output : outcome.message });
      state.vars = { phase: Math.floor(state.messages.length / 100) };
      return { recordedInMessage: state.messages.length - 1 };
    },
  });
}

describe("snapshots", () => {
  it("cost what a step changed: the bytes written at step 500 are about those at step 10", async () => {
    sqlite = tempSqlite();
    const { store, seen } = recording(sqlite.open() as SqliteStore);
    h = harness([scribe(500)], { store });
    const rt = h.runtime;
    const run = await rt.start("scribe", null);
    const docSizes = new Map<number, number>();
    const unsubscribe = rt.bus.subscribe(run.id, (event) => {
      if (event.kind !== "journal" || event.entry.type !== "call.completed") return;
      const row = store.database.prepare("SELECT length(doc) AS n FROM runs WHERE id = ?").get(run.id) as { n: number };
      docSizes.set(event.entry.callSeq ?? 0, row.n);
    });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 50_000 });
    unsubscribe();
    expect(done).toMatchObject({ status: "completed", step: 500 });

    const at10 = seen.snapshotWrites.get(10)!;
    const at500 = seen.snapshotWrites.get(500)!;
    expect(at10).toBeGreaterThan(1_000);
    expect(at500 / at10).toBeGreaterThan(0.9);
    expect(at500 / at10).toBeLessThan(1.1);
    // The run record is rewritten on every update, so it must not grow with history either.
    expect(docSizes.get(500)! / docSizes.get(10)!).toBeLessThan(1.1);

    const db = store.database;
    const range = [rowKey(store.runKey(run.id)!, 0), rowKey(store.runKey(run.id)! + 1, 0)];
    const varsRows = db.prepare("SELECT count(*) AS n FROM journal WHERE k >= ? AND k < ? AND vars IS NOT NULL").get(...range) as { n: number };
    expect(varsRows.n).toBe(6);
    const messageBytes = db.prepare("SELECT sum(length(data)) AS n FROM journal WHERE k >= ? AND k < ? AND type <= 0").get(...range) as { n: number };
    expect(messageBytes.n).toBeLessThan(500 * 1_200);
  });

  it("resume reads the latest snapshot, never the journal", async () => {
    sqlite = tempSqlite();
    const { store, seen } = recording(sqlite.open() as SqliteStore);
    h = harness([scribe(300)], { store });
    const rt = h.runtime;
    const run = await rt.start("scribe", null, { budgets: { maxSteps: 250 } });
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"], { timeoutMs: 50_000 });
    expect(paused).toMatchObject({ status: "paused", step: 250 });
    await rt.settled(run.id);
    seen.journalReads = 0;
    seen.stateLoads = 0;
    await rt.resume(run.id, { budgets: { maxSteps: 10_000 } });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 50_000 });
    expect(done).toMatchObject({ status: "completed", output: 300 });
    expect(seen.journalReads).toBe(0);
    // Once: the resume reads and verifies it, and hands it to the executor it starts here.
    expect(seen.stateLoads).toBe(1);
  });
});

describe("snapshot checksums", () => {
  it("verify a restored state and refuse any changed byte", () => {
    const state = { messages: [{ role: "user" as const, content: "hello" }], vars: { n: 1 } };
    const { write } = SnapshotWriter.forNewRun(state, 1);
    const stored = { head: { seq: 1, varsSeq: 1, ...write.head }, varsJson: write.varsJson!, messages: write.appendMessages };
    expect(restoreState("run_x", stored).state).toEqual(state);
    expect(() => restoreState("run_x", { ...stored, messages: ['{"role":"user","content":"hellp"}'] })).toThrow(SnapshotCorruptError);
    expect(() => restoreState("run_x", { ...stored, varsJson: '{"n":2}' })).toThrow(SnapshotCorruptError);
    expect(() => restoreState("run_x", { ...stored, messages: [] })).toThrow(SnapshotCorruptError);
    expect(() => restoreState("run_x", { ...stored, head: { ...stored.head, schemaVersion: 99 } })).toThrow(/schema version 99/);
  });

  it("chain the same value however many bodies are extended at once (a step's one, or a whole run's on resume)", () => {
    const bodies = Array.from({ length: 150 }, (_, i) => JSON.stringify({ role: "assistant", content: `étape ${i} ${"🧭".repeat(i % 3)} ${"x".repeat(i * 7)}` }));
    const oneByOne = bodies.reduce((chain, body) => extendChain(chain, [body]), emptyChain);
    expect(extendChain(emptyChain, bodies)).toBe(oneByOne);
    expect(extendChain(extendChain(emptyChain, bodies.slice(0, 70)), bodies.slice(70))).toBe(oneByOne);
    expect(extendChain(emptyChain, bodies.slice(0, 149))).not.toBe(oneByOne);
  });
});
