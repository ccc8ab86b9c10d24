import { describe, expect, it } from "vitest";
import { SnapshotWriter } from "../engine/snapshot.js";
import { storeConformance } from "../testing/store-conformance.js";
import { tempPostgres } from "../testing/temp-postgres.js";
import { PostgresStore } from "./pg-store.js";

storeConformance("postgres", async () => {
  const db = tempPostgres();
  const store = await db.open().open();
  return { store, cleanup: () => db.cleanup() };
});

describe("PostgresStore", () => {
  it("refuses a database it cannot reach with store_error, naming it without the password", async () => {
    const store = new PostgresStore({ connectionString: "postgres://postgres:hunter2@127.0.0.1:1/none", schema: "nowhere" });
    const error = await store.open().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "store_error" });
    expect(String((error as Error).message)).toContain("127.0.0.1:1");
    expect(String((error as Error).message)).not.toContain("hunter2");
    await store.close();
  });

  it("migrates once when two processes open a new schema together, and records the migration", async () => {
    const db = tempPostgres();
    try {
      const [a, b] = [db.open(), db.open()];
      await Promise.all([a.open(), b.open()]);
      const run = await a.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 1, 0).write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      expect(await b.getRun("run_1")).toEqual(run);
    } finally {
      await db.cleanup();
    }
  });

  it("sees another connection's write: an update from a stale cached version is retried against the row as it is", async () => {
    const db = tempPostgres();
    try {
      const [a, b] = [await db.open().open(), await db.open().open()];
      await a.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 1, 0).write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      await b.update({ runId: "run_1", set: { statusReason: "from b" }, journal: [{ type: "status", at: 2, data: {} }] });
      const fromA = await a.update({ runId: "run_1", expect: { version: 2 }, set: { step: 3 }, journal: [{ type: "status", at: 3, data: {} }] });
      expect(fromA.ok).toBe(true);
      expect(fromA.run).toMatchObject({ statusReason: "from b", step: 3, version: 3, journalSeq: 3 });
      const stale = await a.update({ runId: "run_1", expect: { version: 2 }, set: { step: 4 } });
      expect(stale.ok).toBe(false);
      expect((await b.readJournal("run_1")).map((e) => e.seq)).toEqual([1, 2, 3]);
    } finally {
      await db.cleanup();
    }
  });

  it("tells other connections' watchers of a control command written under the executing worker's epoch, not of that worker's own writes", async () => {
    const db = tempPostgres();
    try {
      const [worker, control] = [await db.open().open(), await db.open().open()];
      await worker.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 1, 0).write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      const claimed = await worker.update({ runId: "run_1", claim: { workerId: "w", until: 10_000 }, set: { status: "running" }, journal: [{ type: "status", at: 2, data: {} }] });
      const epoch = claimed.run.epoch;
      const heard: string[] = [];
      let hear: () => void = () => undefined;
      const stop = await worker.watchRuns((runId) => {
        heard.push(runId);
        hear();
      });
      const next = () => new Promise<void>((resolve) => (hear = resolve));
      // The worker's own step: fenced by its epoch, no command. Then a pause from elsewhere, as
      // the runtime writes it: expecting the status and epoch it was decided on, with its command.
      await worker.update({ runId: "run_1", expect: { epoch }, set: { step: 1 }, journal: [{ type: "status", at: 3, data: {} }] });
      const notified = next();
      const command = { id: "cmd_1", runId: "run_1", type: "pause" as const, actor: "ops", reason: null, payload: {}, createdAt: 4, appliedAt: null, outcome: null };
      const paused = await control.update({ runId: "run_1", expect: { status: ["running"], epoch }, set: { status: "pausing" }, journal: [{ type: "control", at: 4, data: {} }], insertCommand: command });
      expect(paused.ok).toBe(true);
      await notified;
      expect(heard).toEqual(["run_1"]);
      expect((await worker.getRuns(["run_1", "run_missing"])).map((r) => [r.id, r.status, r.version])).toEqual([["run_1", "pausing", paused.run.version]]);
      stop();
    } finally {
      await db.cleanup();
    }
  });

  it("claims with SKIP LOCKED: two workers claiming at once get different runs, each claimed once", async () => {
    const db = tempPostgres();
    try {
      const [a, b] = [await db.open().open(), await db.open().open()];
      for (let i = 0; i < 20; i++) {
        await a.createRun(
          { id: `run_${i}`, agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: i },
          SnapshotWriter.forNewRun({ messages: [], vars: {} }, i, 0).write,
          [{ type: "run.created", at: i, data: {} }],
        );
      }
      const plan = (worker: string) => (run: { version: number }) => ({
        expect: { version: run.version, leaseFree: { now: 100, workerId: worker } },
        claim: { workerId: worker, until: 10_000 },
        set: { status: "running" as const },
        journal: [{ type: "status" as const, at: 100, data: { from: "queued", to: "running" } }],
      });
      const [byA, byB] = await Promise.all([a.claimRuns(100, 12, plan("wa")), b.claimRuns(100, 12, plan("wb"))]);
      const ids = [...byA, ...byB].map((r) => r.run.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.length).toBe(20);
      for (const id of ids) {
        const run = (await a.getRun(id))!;
        expect(run).toMatchObject({ status: "running", epoch: 1 });
        expect((await a.readJournal(id)).map((e) => e.type)).toEqual(["run.created", "status"]);
      }
      expect(await a.claimRuns(100, 12, plan("wa"))).toEqual([]);
    } finally {
      await db.cleanup();
    }
  });
});
