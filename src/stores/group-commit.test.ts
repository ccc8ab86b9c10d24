import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SnapshotWriter } from "../engine/snapshot.js";
import type { NewRun } from "../engine/store.js";
import { SqliteStore } from "./sqlite-store.js";

/**
 * Group commit on the SQLite store: the run updates (and the run creations) made in one turn of
 * the event loop share one transaction, each keeps its own outcome, and none is acknowledged
 * before it is committed.
 */

let dir: string;
let store: SqliteStore;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "tether-group-"));
  store = new SqliteStore({ path: join(dir, "tether.db") });
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function createRuns(n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const run: NewRun = { id: `run_${i}`, agent: "a", agentVersion: "1", owner: "o", status: "running", input: null, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1000 + i };
    const { write } = SnapshotWriter.forNewRun({ messages: [], vars: {} }, run.createdAt, 0);
    await store.createRun(run, write, [{ type: "run.created", at: run.createdAt, data: {} }]);
    ids.push(run.id);
  }
  return ids;
}

/** Write transactions this connection has committed (the second half of its change marker). */
const transactions = () => Number(store.changeMarker().split(":")[1]);

describe("group commit (SQLite)", () => {
  it("twenty updates made in one turn commit in two transactions (the first at once, the rest together), each with its own journal entry", async () => {
    const ids = await createRuns(20);
    const before = transactions();
    const results = await Promise.all(ids.map((runId, i) => store.update({ runId, set: { step: i + 1 }, journal: [{ type: "call.progress", at: 2000, data: { i } }] })));
    expect(transactions() - before).toBe(2);
    expect(results.every((r) => r.ok)).toBe(true);
    for (const [i, runId] of ids.entries()) {
      expect((await store.getRun(runId))?.step).toBe(i + 1);
      expect((await store.readJournal(runId, { limit: 10 })).map((e) => e.type)).toEqual(["run.created", "call.progress"]);
    }
  });

  it("a transaction holds at most 64 updates: 150 made in one turn commit in four, and a timer that came due runs between two of them", async () => {
    const ids = await createRuns(150);
    const before = transactions();
    let atTimer = -1;
    setTimeout(() => (atTimer = transactions()), 0);
    const results = await Promise.all(ids.map((runId, i) => store.update({ runId, set: { step: i + 1 }, journal: [{ type: "call.progress", at: 2000, data: { i } }] })));
    const after = transactions();
    // The first inline, then 64, 64 and 22 in the check phases of three turns.
    expect(after - before).toBe(4);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(atTimer).toBeGreaterThan(before);
    expect(atTimer).toBeLessThan(after);
    for (const [i, runId] of ids.entries()) expect((await store.getRun(runId))?.step).toBe(i + 1);
  });

  it("a control write made behind 150 steps goes ahead of them: it commits in the first batch, and the steps keep their order", async () => {
    const ids = await createRuns(152);
    const [paused, ...stepping] = ids.slice(1);
    const committedAt = new Map<string, number>();
    const note = (runId: string) => (result: unknown) => (committedAt.set(runId, transactions()), result);
    // The first write of the turn commits inline; then 150 steps of the runs' executors (fenced by their epoch).
    await store.update({ runId: ids[0], set: { step: 1 } });
    const steps = stepping.map((runId, i) => store.update({ runId, expect: { epoch: 0 }, set: { step: i + 1 }, journal: [{ type: "call.progress", at: 2000, data: { i } }] }).then(note(runId)));
    // A person's pause, made last in the turn.
    const pause = store.update({ runId: paused, set: { status: "pausing" }, journal: [{ type: "status", at: 2000, data: { from: "running", to: "pausing" } }] }).then(note(paused));
    await Promise.all([...steps, pause]);
    const first = Math.min(...committedAt.values());
    expect(committedAt.get(paused)).toBe(first);
    const order = stepping.map((runId) => committedAt.get(runId)!);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(order.filter((t) => t === first)).toHaveLength(63);
    expect((await store.getRun(paused))?.status).toBe("pausing");
  });

  it("a lone update commits inline, before its promise is even awaited", async () => {
    const [runId] = await createRuns(1);
    await new Promise((resolve) => setImmediate(resolve));
    const before = transactions();
    const pending = store.update({ runId, set: { step: 7 } });
    expect(transactions() - before).toBe(1);
    expect((await pending).ok).toBe(true);
  });

  it("an update that fails in a batch rolls back alone: its caller gets the error, the others commit", async () => {
    const ids = await createRuns(3);
    const settled = await Promise.allSettled([
      store.update({ runId: ids[0], set: { step: 1 }, journal: [{ type: "call.progress", at: 2000, data: {} }] }),
      store.update({ runId: ids[1], set: { step: 1 }, journal: [{ type: "call.progress", at: 2000, data: {} }] }),
      store.update({ runId: "run_missing", set: { step: 1 } }),
      // Refused by the store's own rule (a snapshot needs a journal entry), after its run row was read.
      store.update({ runId: ids[2], set: { step: 9 }, snapshot: SnapshotWriter.forNewRun({ messages: [], vars: {} }, 2000, 9).write }),
      store.update({ runId: ids[2], set: { step: 2 }, journal: [{ type: "call.progress", at: 2001, data: {} }] }),
    ]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "rejected", "fulfilled"]);
    expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ code: "run_not_found" });
    expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({ code: "invalid_input" });
    expect((await store.getRun(ids[2]))?.step).toBe(2);
    expect((await store.readJournal(ids[2], { limit: 10 })).map((e) => e.type)).toEqual(["run.created", "call.progress"]);
  });

  it("expectations are checked in the order the updates were made: the second of two claims in one turn is refused", async () => {
    const [runId] = await createRuns(1);
    const [first, second] = await Promise.all([
      store.update({ runId, expect: { leaseFree: { now: 3000, workerId: "w1" } }, claim: { workerId: "w1", until: 9000 } }),
      store.update({ runId, expect: { leaseFree: { now: 3000, workerId: "w2" } }, claim: { workerId: "w2", until: 9000 } }),
    ]);
    expect(first.ok).toBe(true);
    expect(second.ok).toBe(false);
    expect((await store.getRun(runId))?.lease?.workerId).toBe("w1");
  });

  it("close commits the updates still waiting for their turn", async () => {
    const ids = await createRuns(3);
    const path = store.path;
    const pending = ids.map((runId) => store.update({ runId, set: { step: 5 } }));
    await store.close();
    await Promise.all(pending);
    store = new SqliteStore({ path });
    for (const runId of ids) expect((await store.getRun(runId))?.step).toBe(5);
  });

  it("150 runs created in one turn commit in four transactions, a timer that came due runs between two of them, and one refused by a halt is rolled back alone", async () => {
    await store.setHalt({ scope: "agent:halted", actor: "ops", reason: null, at: 500 });
    const before = transactions();
    let atTimer = -1;
    setTimeout(() => (atTimer = transactions()), 0);
    const creations = Array.from({ length: 150 }, (_, i) => {
      const agent = i === 70 ? "halted" : "a";
      const run: NewRun = { id: `run_${i}`, agent, agentVersion: "1", owner: "o", status: "queued", input: i, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1000 + i, refuseIfHalted: true };
      const { write } = SnapshotWriter.forNewRun({ messages: [{ role: "user", content: `run ${i}` }], vars: {} }, run.createdAt, 0);
      return store.createRun(run, write, [{ type: "run.created", at: run.createdAt, data: {} }]);
    });
    const settled = await Promise.allSettled(creations);
    // The first inline, then 64, 64 and 21 in the check phases of three turns.
    const after = transactions();
    expect(after - before).toBe(4);
    expect(atTimer).toBeGreaterThan(before);
    expect(atTimer).toBeLessThan(after);
    expect(settled.filter((s) => s.status === "rejected").map((s) => (s as PromiseRejectedResult).reason)).toEqual([expect.objectContaining({ code: "halted" })]);
    expect(settled[70].status).toBe("rejected");
    expect(await store.getRun("run_70")).toBeUndefined();
    for (const i of [0, 69, 71, 149]) {
      expect(await store.getRun(`run_${i}`)).toMatchObject({ id: `run_${i}`, input: i, status: "queued" });
      expect((await store.readJournal(`run_${i}`)).map((e) => e.type)).toEqual(["run.created"]);
    }
    expect((await store.listRuns({ limit: 1000 })).length).toBe(149);
  });

  it("close commits the creations still waiting for their turn", async () => {
    const path = store.path;
    const pending = Array.from({ length: 3 }, (_, i) => {
      const run: NewRun = { id: `run_${i}`, agent: "a", agentVersion: "1", owner: "o", status: "queued", input: null, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1000 + i };
      return store.createRun(run, SnapshotWriter.forNewRun({ messages: [], vars: {} }, run.createdAt, 0).write, [{ type: "run.created", at: run.createdAt, data: {} }]);
    });
    await store.close();
    await Promise.all(pending);
    store = new SqliteStore({ path });
    for (let i = 0; i < 3; i++) expect(await store.getRun(`run_${i}`)).toMatchObject({ status: "queued" });
  });
});
