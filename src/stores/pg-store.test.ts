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
});
