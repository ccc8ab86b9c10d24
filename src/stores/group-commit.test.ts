import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SnapshotWriter } from "../engine/snapshot.js";
import type { NewRun } from "../engine/store.js";
import { GroupCommit, type Outcome } from "./group-commit.js";
import { SqliteStore } from "./sqlite-store.js";

/**
 * Group commit on the SQLite store: the run updates (and the run creations) made in one turn of
 * the event loop share one transaction, each keeps its own outcome, and none is acknowledged
 * before it is committed. The store's tests count transactions of up to 64 writes (the time
 * budget off: how many writes fit in it depends on the machine); the budget is tested on a
 * clock of the test's own.
 */

let dir: string;
let store: SqliteStore;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "tether-group-"));
  store = new SqliteStore({ path: join(dir, "tether.db"), commitBudgetMs: Number.POSITIVE_INFINITY });
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

  it("a pause goes ahead of the run's own step waiting behind 150 others, which follows right after it; the run's writes while it is pausing go ahead of other runs' steps too", async () => {
    const ids = await createRuns(152);
    const pausedRun = ids[101];
    const committedAt = new Map<string, number>();
    const note = (key: string) => (result: unknown) => (committedAt.set(key, transactions()), result);
    const step = (runId: string, i: number) => store.update({ runId, expect: { epoch: 0 }, set: { step: i + 1 }, journal: [{ type: "call.progress", at: 2000, data: { i } }] });
    await store.update({ runId: ids[0], set: { step: 1 } });
    const steps = ids.slice(1).map((runId, i) => step(runId, i).then(note(runId)));
    const pause = store.update({ runId: pausedRun, set: { status: "pausing" }, journal: [{ type: "status", at: 2000, data: { from: "running", to: "pausing" } }] }).then(note("pause"));
    await Promise.all([...steps, pause]);
    const first = Math.min(...committedAt.values());
    expect(committedAt.get(pausedRun)).toBe(first);
    expect(committedAt.get("pause")).toBe(first);
    expect(committedAt.get(ids[100])).toBeGreaterThan(first);
    const journal = await store.readJournal(pausedRun, { limit: 10 });
    expect(journal.map((e) => e.type)).toEqual(["run.created", "status", "call.progress"]);

    // Its executor writes on while the run is pausing: behind a hundred steps of other runs, it goes first.
    committedAt.clear();
    await store.update({ runId: ids[0], set: { step: 2 } });
    const more = ids.slice(1, 101).map((runId, i) => step(runId, i + 200).then(note(runId)));
    const own = step(pausedRun, 300).then(note("own"));
    await Promise.all([...more, own]);
    const next = Math.min(...committedAt.values());
    expect(committedAt.get("own")).toBe(next);
    expect(committedAt.get(ids[64])).toBeGreaterThan(next);
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
    // The batch was applied once without savepoints, rolled back at the failure, and applied again
    // with them: the updates before the failure are in the journal once.
    for (const runId of ids.slice(0, 2)) {
      expect((await store.readJournal(runId, { limit: 10 })).map((e) => [e.type, e.seq])).toEqual([["run.created", 1], ["call.progress", 2]]);
      expect(await store.getRun(runId)).toMatchObject({ step: 1, journalSeq: 2 });
    }
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

  it("with a budget of 0 ms a transaction holds one write: ten updates in one turn commit in ten, in order", async () => {
    const path = store.path;
    await store.close();
    store = new SqliteStore({ path, commitBudgetMs: 0 });
    const ids = await createRuns(10);
    await new Promise((resolve) => setImmediate(resolve));
    const before = transactions();
    const committedAt: number[] = [];
    await Promise.all(ids.map((runId, i) => store.update({ runId, set: { step: i + 1 } }).then(() => (committedAt[i] = transactions()))));
    expect(transactions() - before).toBe(10);
    expect(committedAt).toEqual(Array.from({ length: 10 }, (_, i) => before + i + 1));
    for (const [i, runId] of ids.entries()) expect((await store.getRun(runId))?.step).toBe(i + 1);
  });
});

/**
 * The time budget of group commit, on a clock that moves 1 ms for each write applied: a
 * transaction takes writes while it has spent less than its budget, the rest wait for the next
 * turn at the head of the queue, an urgent one still first.
 */
describe("group commit's time budget", () => {
  function recorder(budgetMs: number) {
    let time = 0;
    const transactions: string[][] = [];
    const commit = new GroupCommit<string, string>(
      (item) => (transactions.push([item]), (time += 1), item),
      (items, more) => {
        const applied: Outcome<string>[] = [];
        for (const item of items) {
          if (applied.length > 0 && !more()) break;
          time += 1;
          applied.push({ ok: true, value: item });
        }
        transactions.push(applied.map((outcome) => (outcome.ok ? outcome.value : "")));
        return applied;
      },
      { budgetMs, now: () => time },
    );
    return { commit, transactions };
  }

  it("writes that take 1 ms each go four to a transaction under a 4 ms budget, in order, each transaction in a turn of its own", async () => {
    const { commit, transactions } = recorder(4);
    let turns = 0;
    const countTurns = () => {
      turns += 1;
      if (transactions.length < 5) setImmediate(countTurns);
    };
    setImmediate(countTurns);
    const items = Array.from({ length: 14 }, (_, i) => `w${i}`);
    expect(await Promise.all(items.map((item) => commit.submit(item)))).toEqual(items);
    expect(transactions).toEqual([["w0"], ["w1", "w2", "w3", "w4"], ["w5", "w6", "w7", "w8"], ["w9", "w10", "w11", "w12"], ["w13"]]);
    expect(turns).toBeGreaterThanOrEqual(4);
  });

  it("an urgent write the budget left out goes first in the next transaction, ahead of the ordinary ones and of an urgent one made later", async () => {
    const { commit, transactions } = recorder(2);
    const done: Promise<unknown>[] = [Promise.resolve(commit.submit("first"))];
    for (const item of ["a", "b", "c"]) done.push(Promise.resolve(commit.submit(item)));
    for (const item of ["U1", "U2", "U3"]) done.push(Promise.resolve(commit.submit(item, true)));
    // Made once the first batch has committed: behind the urgent one it left, ahead of the ordinary ones.
    done.push((done[4] as Promise<unknown>).then(() => commit.submit("U4", true)));
    await Promise.all(done);
    expect(transactions).toEqual([["first"], ["U1", "U2"], ["U3", "U4"], ["a", "b"], ["c"]]);
  });

  it("promote moves the ordinary writes that match behind the urgent ones, in their order, ahead of an urgent one made after", async () => {
    const { commit, transactions } = recorder(Number.POSITIVE_INFINITY);
    const done = [commit.submit("first"), ...["a1", "b1", "a2", "c1"].map((item) => commit.submit(item)), commit.submit("U1", true)];
    commit.promote((item) => item.startsWith("a"));
    done.push(commit.submit("U2", true));
    await Promise.all(done);
    expect(transactions).toEqual([["first"], ["U1", "a1", "a2", "U2", "b1", "c1"]]);
  });

  it("with no budget a transaction holds up to its 64 writes", async () => {
    const { commit, transactions } = recorder(Number.POSITIVE_INFINITY);
    await Promise.all(Array.from({ length: 100 }, (_, i) => commit.submit(`w${i}`)));
    expect(transactions.map((t) => t.length)).toEqual([1, 64, 35]);
  });
});
