import { describe, expect, it } from "vitest";
import { SnapshotWriter } from "../engine/snapshot.js";
import { storeConformance } from "../testing/store-conformance.js";
import { tempPostgres } from "../testing/temp-postgres.js";
import pg from "pg";
import type { HaltRecord, RunRecord } from "../engine/store.js";
import { migrations } from "./pg-schema.js";
import { PostgresStore } from "./pg-store.js";

storeConformance("postgres", async () => {
  const db = tempPostgres();
  const store = await db.open().open();
  return { store, cleanup: () => db.cleanup() };
});

describe("PostgresStore", () => {
  it("names its connections tether in pg_stat_activity, unless the URL names them", async () => {
    const db = tempPostgres();
    try {
      const appName = async (url: string) => {
        const store = await new PostgresStore({ connectionString: url, schema: db.schema, poolSize: 1 }).open();
        try {
          const pool = (store as unknown as { pool: pg.Pool }).pool;
          return (await pool.query<{ name: string }>("SELECT application_name AS name FROM pg_stat_activity WHERE pid = pg_backend_pid()")).rows[0].name;
        } finally {
          await store.close();
        }
      };
      expect(await appName(db.url)).toBe("tether");
      expect(await appName(`${db.url}${db.url.includes("?") ? "&" : "?"}application_name=billing-worker`)).toBe("billing-worker");
    } finally {
      await db.cleanup();
    }
  });

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

  it("tells other connections' watchers of a control command written under the executing worker's epoch, not of that worker's own writes; the worker gets the run's new record with the news, a bystander only its id", async () => {
    const db = tempPostgres();
    try {
      const [worker, control, bystander] = [await db.open().open(), await db.open().open(), await db.open().open()];
      await worker.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 1, 0).write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      const claimed = await worker.update({ runId: "run_1", claim: { workerId: "w", until: 10_000 }, set: { status: "running" }, journal: [{ type: "status", at: 2, data: {} }] });
      const epoch = claimed.run.epoch;
      const heard: string[] = [];
      const records: (RunRecord | undefined)[] = [];
      let hear: () => void = () => undefined;
      const stop = await worker.watchRuns((runId, record) => {
        heard.push(runId);
        records.push(record);
        hear();
      });
      const bystanderHeard: [string, RunRecord | undefined][] = [];
      const stopBystander = await bystander.watchRuns((runId, record) => bystanderHeard.push([runId, record]));
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
      // The worker writes run_1: the notification brings the row, as a read would return it.
      expect(records).toEqual([paused.run]);
      expect((await worker.getRuns(["run_1", "run_missing"])).map((r) => [r.id, r.status, r.version])).toEqual([["run_1", "pausing", paused.run.version]]);
      await expect.poll(() => bystanderHeard).toEqual([["run_1", undefined]]);
      stop();
      stopBystander();
    } finally {
      await db.cleanup();
    }
  });

  it("names a run whose row does not fit a notification by its id alone, even to its worker", async () => {
    const db = tempPostgres();
    try {
      const [worker, control] = [await db.open().open(), await db.open().open()];
      await worker.createRun(
        { id: "run_big", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: { text: "é".repeat(5000) }, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 1, 0).write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      const claimed = await worker.update({ runId: "run_big", claim: { workerId: "w", until: 10_000 }, set: { status: "running" }, journal: [{ type: "status", at: 2, data: {} }] });
      const heard: [string, RunRecord | undefined][] = [];
      const stop = await worker.watchRuns((runId, record) => heard.push([runId, record]));
      const command = { id: "cmd_1", runId: "run_big", type: "pause" as const, actor: "ops", reason: null, payload: {}, createdAt: 3, appliedAt: null, outcome: null };
      const paused = await control.update({ runId: "run_big", expect: { status: ["running"], epoch: claimed.run.epoch }, set: { status: "pausing" }, journal: [{ type: "control", at: 3, data: {} }], insertCommand: command });
      expect(paused.ok).toBe(true);
      await expect.poll(() => heard).toEqual([["run_big", undefined]]);
      expect((await worker.getRuns(["run_big"]))[0]).toEqual(paused.run);
      stop();
    } finally {
      await db.cleanup();
    }
  });

  it("upgrades a schema at migration 1: its runs read, change and list by update time as before", async () => {
    const db = tempPostgres();
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const first = await db.open().open();
      await first.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 120_000 },
        SnapshotWriter.forNewRun({ messages: [], vars: {} }, 120_000, 0).write,
        [{ type: "run.created", at: 120_000, data: {} }],
      );
      await first.close();
      // Back to the tables as migration 1 left them.
      const s = `"${db.schema}"`;
      await client.query(`ALTER TABLE ${s}.runs DROP COLUMN updated_bucket`);
      await client.query(`ALTER TABLE ${s}.journal DROP COLUMN crc`);
      await client.query(`ALTER TABLE ${s}.messages DROP COLUMN crc`);
      await client.query(`ALTER TABLE ${s}.runs DROP COLUMN crc`);
      await client.query(`CREATE INDEX runs_by_status ON ${s}.runs (status, updated_at)`);
      await client.query(`CREATE INDEX runs_by_updated ON ${s}.runs (updated_at)`);
      await client.query(`CREATE INDEX journal_snapshots ON ${s}.journal (run_id, snap_step) WHERE snap_seq IS NOT NULL`);
      await client.query(`DELETE FROM ${s}.migrations WHERE version > 1`);

      const store = await db.open().open();
      const applied = await client.query<{ version: number }>(`SELECT version FROM ${s}.migrations ORDER BY version`);
      expect(applied.rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
      expect(await store.getRun("run_1")).toMatchObject({ status: "queued", updatedAt: 120_000 });
      expect((await store.listRuns({ updatedAfter: 119_999 })).map((r) => r.id)).toEqual(["run_1"]);
      expect(await store.listRuns({ updatedAfter: 120_000 })).toEqual([]);
      await store.update({ runId: "run_1", set: { status: "running" }, journal: [{ type: "status", at: 185_000, data: {} }] });
      expect((await store.listRuns({ updatedAfter: 184_999 })).map((r) => r.id)).toEqual(["run_1"]);
      expect(await store.listRuns({ updatedAfter: 185_000 })).toEqual([]);
      expect((await store.loadState("run_1")).head.step).toBe(0);
    } finally {
      await client.end();
      await db.cleanup();
    }
  });

  it("writes the steps waiting for a busy pool together: each run's own messages and journal, a moved run retried, a fenced one refused", async () => {
    const db = tempPostgres();
    // One connection: the steps of ten runs wait for it and go in one statement.
    const worker = await new PostgresStore({ connectionString: db.url, schema: db.schema, poolSize: 1 }).open();
    const other = await db.open().open();
    try {
      const writers: SnapshotWriter[] = [];
      const epochs: number[] = [];
      for (let i = 0; i < 10; i++) {
        const { writer, write } = SnapshotWriter.forNewRun({ messages: [], vars: {} }, i, 0);
        await worker.createRun(
          { id: `run_${i}`, agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: i },
          write,
          [{ type: "run.created", at: i, data: {} }],
        );
        writer.commit();
        writers.push(writer);
        epochs.push((await worker.update({ runId: `run_${i}`, claim: { workerId: "w", until: 10_000 }, set: { status: "running" }, journal: [{ type: "status", at: 10, data: {} }] })).run.epoch);
      }
      await other.update({ runId: "run_3", set: { statusReason: "noted" }, journal: [{ type: "status", at: 11, data: {} }] });
      await other.update({ runId: "run_4", claim: { workerId: "w2", until: 10_000 }, journal: [{ type: "status", at: 12, data: {} }] });
      const results = await Promise.all(
        writers.map((writer, i) =>
          worker.update({
            runId: `run_${i}`,
            expect: { epoch: epochs[i] },
            set: { step: 1 },
            journal: [
              { type: "call.completed", at: 20, callSeq: 1, data: { i } },
              { type: "call.started", at: 20, callSeq: 2, data: { i } },
            ],
            snapshot: writer.prepare({ messages: [{ role: "user", content: `hello ${i}` }, { role: "assistant", content: `hi ${i}` }], vars: { i } }, 1, 20),
          }),
        ),
      );
      expect(results.map((r) => r.ok)).toEqual([true, true, true, true, false, true, true, true, true, true]);
      for (let i = 0; i < 10; i++) {
        const journal = await other.readJournal(`run_${i}`);
        const state = await other.loadState(`run_${i}`);
        if (i === 4) {
          expect(journal.map((e) => e.type)).toEqual(["run.created", "status", "status"]);
          expect(state.messages).toEqual([]);
          continue;
        }
        expect(journal.map((e) => e.seq)).toEqual(journal.map((_, n) => n + 1));
        expect(journal.slice(-2).map((e) => [e.type, e.data])).toEqual([
          ["call.completed", { i }],
          ["call.started", { i }],
        ]);
        expect(state.messages.map((m) => JSON.parse(m).content)).toEqual([`hello ${i}`, `hi ${i}`]);
        expect(JSON.parse(state.varsJson)).toEqual({ i });
        expect(await other.getRun(`run_${i}`)).toMatchObject({ step: 1, ...(i === 3 ? { statusReason: "noted" } : {}) });
      }
    } finally {
      await worker.close();
      await db.cleanup();
    }
  });

  it("writes the starts that arrive together in one transaction: each run whole, a halted agent's refused, a taken id failing alone", async () => {
    const db = tempPostgres();
    const store = await new PostgresStore({ connectionString: db.url, schema: db.schema, poolSize: 1 }).open();
    const other = await db.open().open();
    const create = (id: string, agent: string, at: number) => {
      const { write } = SnapshotWriter.forNewRun({ messages: [{ role: "user", content: `task of ${id}` }], vars: { id } }, at, 0);
      return store.createRun(
        { id, agent, agentVersion: "1", owner: "o", status: "queued", input: { id }, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: at, refuseIfHalted: true },
        write,
        [{ type: "run.created", at, data: { agent } }],
      );
    };
    try {
      await store.setHalt({ scope: "agent:stopped", actor: "ops", reason: "incident", at: 1 });
      await create("run_before", "x", 1);
      // Twenty starts in one turn of the loop, as a batch job or a busy API makes them.
      const ids = Array.from({ length: 20 }, (_, i) => `run_${i}`);
      const outcomes = await Promise.allSettled(ids.map((id, i) => create(id, i % 5 === 4 ? "stopped" : "x", 10 + i)));
      for (const [i, outcome] of outcomes.entries()) {
        if (i % 5 === 4) {
          expect(outcome).toMatchObject({ status: "rejected", reason: { code: "halted", details: { scope: "agent:stopped" } } });
          expect(await other.getRun(ids[i])).toBeUndefined();
          continue;
        }
        expect(outcome.status).toBe("fulfilled");
        const run = (outcome as PromiseFulfilledResult<RunRecord>).value;
        expect(await other.getRun(ids[i])).toEqual(run);
        expect(await other.readJournal(ids[i])).toMatchObject([{ seq: 1, type: "run.created", data: { agent: "x" } }]);
        const state = await other.loadState(ids[i]);
        expect(state.messages.map((m) => JSON.parse(m).content)).toEqual([`task of ${ids[i]}`]);
        expect(JSON.parse(state.varsJson)).toEqual({ id: ids[i] });
      }
      // One transaction for all sixteen: their rows carry the same inserting transaction id.
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const { rows } = await client.query(`SELECT count(DISTINCT xmin::text) AS n FROM "${db.schema}".runs WHERE id = ANY($1)`, [ids]);
        expect(Number(rows[0].n)).toBe(1);
      } finally {
        await client.end();
      }
      // A start whose id is taken fails on its own; the others beside it are written.
      const again = await Promise.allSettled([create("run_new_1", "x", 50), create("run_before", "x", 51), create("run_new_2", "x", 52)]);
      expect(again.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect((again[1] as PromiseRejectedResult).reason).toMatchObject({ code: "store_error" });
      expect(await other.readJournal("run_before")).toHaveLength(1);
      expect(await other.getRun("run_new_2")).toMatchObject({ id: "run_new_2", createdAt: 52 });
    } finally {
      await store.close();
      await db.cleanup();
    }
  });

  it("writes a step alone with its values as parameters: any number of journal entries and messages, fenced by the epoch", async () => {
    const db = tempPostgres();
    const worker = await new PostgresStore({ connectionString: db.url, schema: db.schema }).open();
    const other = await db.open().open();
    try {
      const { writer, write } = SnapshotWriter.forNewRun({ messages: [], vars: {} }, 0, 0);
      await worker.createRun(
        { id: "run_1", agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 0 },
        write,
        [{ type: "run.created", at: 0, data: {} }],
      );
      writer.commit();
      const { epoch } = (await worker.update({ runId: "run_1", claim: { workerId: "w", until: 10_000 }, set: { status: "running" }, journal: [{ type: "status", at: 1, data: {} }] })).run;
      // One entry and one message; then six entries and six messages (more than a statement of parameters takes).
      for (const [step, count] of [
        [1, 1],
        [2, 6],
      ] as const) {
        const messages = (await other.loadState("run_1")).messages.map((m) => JSON.parse(m) as { role: "assistant"; content: string });
        for (let n = 0; n < count; n++) messages.push({ role: "assistant" as const, content: `step ${step} message ${n} "quoted" \\ ✓` });
        const snapshot = writer.prepare({ messages, vars: { step } }, step, 10 + step);
        const result = await worker.update({
          runId: "run_1",
          expect: { epoch },
          set: { step },
          journal: Array.from({ length: count }, (_, n) => ({ type: "call.completed" as const, at: 10 + step, callSeq: step * 10 + n, data: { step, n, text: "a \"b\"" } })),
          snapshot,
        });
        expect(result.ok).toBe(true);
        writer.commit();
      }
      const journal = await other.readJournal("run_1");
      expect(journal.map((e) => e.seq)).toEqual(journal.map((_, n) => n + 1));
      expect(journal.slice(2).map((e) => [e.callSeq, e.data])).toEqual([
        [10, { step: 1, n: 0, text: 'a "b"' }],
        ...Array.from({ length: 6 }, (_, n) => [20 + n, { step: 2, n, text: 'a "b"' }]),
      ]);
      const state = await other.loadState("run_1");
      expect(state.head.step).toBe(2);
      expect(JSON.parse(state.varsJson)).toEqual({ step: 2 });
      expect(state.messages.map((m) => (JSON.parse(m) as { content: string }).content)).toEqual([
        'step 1 message 0 "quoted" \\ ✓',
        ...Array.from({ length: 6 }, (_, n) => `step 2 message ${n} "quoted" \\ ✓`),
      ]);
      // Another worker took the run over: this one's next step is refused and changes nothing.
      await other.update({ runId: "run_1", claim: { workerId: "w2", until: 20_000 }, journal: [{ type: "recovery", at: 30, data: {} }] });
      const refused = await worker.update({ runId: "run_1", expect: { epoch }, set: { step: 3 }, journal: [{ type: "call.completed", at: 31, callSeq: 30, data: {} }] });
      expect(refused.ok).toBe(false);
      expect(refused.run.epoch).toBe(epoch + 1);
      expect((await other.readJournal("run_1")).at(-1)?.type).toBe("recovery");
      expect(await other.getRun("run_1")).toMatchObject({ step: 2 });
    } finally {
      await worker.close();
      await db.cleanup();
    }
  });

  it("loads a snapshot's messages with its row for a short history and on their own for a long one, checked the same way", async () => {
    const db = tempPostgres();
    const store = await db.open().open();
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // 3 messages (read with the snapshot's row) and 70 (more than that statement takes).
      for (const count of [3, 70]) {
        const id = `run_${count}`;
        const { writer, write } = SnapshotWriter.forNewRun({ messages: [], vars: {} }, 0, 0);
        await store.createRun(
          { id, agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 0 },
          write,
          [{ type: "run.created", at: 0, data: {} }],
        );
        writer.commit();
        const messages = Array.from({ length: count }, (_, n) => ({ role: "user" as const, content: `message ${n}: "q" \\ \u0001 ✓ 😀` }));
        await store.update({ runId: id, set: { step: 1 }, journal: [{ type: "call.completed", at: 1, callSeq: 1, data: {} }], snapshot: writer.prepare({ messages, vars: { count } }, 1, 1) });
        expect((await store.loadState(id)).messages.map((m) => JSON.parse(m) as unknown)).toEqual(messages);
        // A byte changed in the last message, then a message gone: refused, naming the run.
        const q = (text: string, params: unknown[]) => client.query(text.replaceAll("S.", `"${db.schema}".`), params);
        const last = (await q("SELECT body FROM S.messages WHERE run_id = $1 AND idx = $2", [id, count - 1])).rows[0].body as string;
        await q("UPDATE S.messages SET body = $3 WHERE run_id = $1 AND idx = $2", [id, count - 1, last.replace("message", "massage")]);
        await expect(store.loadState(id)).rejects.toThrow(`run ${id} cannot resume: its snapshot is corrupt (message ${count - 1} before snapshot`);
        await q("DELETE FROM S.messages WHERE run_id = $1 AND idx = $2", [id, 1]);
        await expect(store.loadState(id)).rejects.toThrow(`holds ${count} messages but ${count - 1} are stored`);
      }
    } finally {
      await client.end();
      await store.close();
      await db.cleanup();
    }
  });

  it("renews the leases due together, each only for its holder, including a run another process wrote meanwhile", async () => {
    const db = tempPostgres();
    try {
      const [worker, other] = [await db.open().open(), await db.open().open()];
      const epochs: number[] = [];
      for (let i = 0; i < 4; i++) {
        await worker.createRun(
          { id: `run_${i}`, agent: "x", agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: i },
          SnapshotWriter.forNewRun({ messages: [], vars: {} }, i, 0).write,
          [{ type: "run.created", at: i, data: {} }],
        );
        const claimed = await worker.update({ runId: `run_${i}`, claim: { workerId: "w", until: 1_000 }, set: { status: "running" }, journal: [{ type: "status", at: 10, data: {} }] });
        epochs.push(claimed.run.epoch);
      }
      // run_2 moves under the worker's feet; run_3 was taken over by another worker (epoch + 1).
      await other.update({ runId: "run_2", set: { statusReason: "noted" }, journal: [{ type: "status", at: 11, data: {} }] });
      await other.update({ runId: "run_3", claim: { workerId: "w2", until: 5_000 }, journal: [{ type: "status", at: 12, data: {} }] });
      const results = await Promise.all(
        [0, 1, 2, 3].map((i) => worker.update({ runId: `run_${i}`, renewLease: { workerId: "w", until: 9_000 }, expect: { epoch: epochs[i] } })),
      );
      expect(results.map((r) => r.ok)).toEqual([true, true, true, false]);
      const stored = await Promise.all([0, 1, 2, 3].map((i) => other.getRun(`run_${i}`)));
      expect(stored.map((r) => r!.lease)).toEqual([
        { workerId: "w", epoch: epochs[0], until: 9_000 },
        { workerId: "w", epoch: epochs[1], until: 9_000 },
        { workerId: "w", epoch: epochs[2], until: 9_000 },
        { workerId: "w2", epoch: epochs[3] + 1, until: 5_000 },
      ]);
      expect(stored[2]).toMatchObject({ statusReason: "noted", version: 4 });
      expect(results.slice(0, 3).map((r) => r.run.version)).toEqual([3, 3, 4]);
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

  it("claims with the halts in force in hand, and plans nothing when there is no run to claim", async () => {
    const db = tempPostgres();
    const store = await db.open().open();
    try {
      const seen: string[][] = [];
      const plan = (run: RunRecord, halts: readonly HaltRecord[]) => {
        seen.push(halts.map((h) => `${h.scope} by ${h.actor} at ${h.at}: ${h.reason}`));
        return halts.some((h) => h.scope === `agent:${run.agent}`) ? undefined : { claim: { workerId: "w", until: 10_000 }, set: { status: "running" as const }, journal: [{ type: "status" as const, at: 100, data: {} }] };
      };
      expect(await store.claimRuns(100, 10, plan)).toEqual([]);
      expect(seen).toEqual([]);
      await store.setHalt({ scope: "agent:x", actor: "ops", reason: "incident 7", at: 50 });
      for (const [i, agent] of ["x", "y"].entries()) {
        await store.createRun(
          { id: `run_${agent}`, agent, agentVersion: "1", owner: "o", status: "queued", input: {}, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: i },
          SnapshotWriter.forNewRun({ messages: [], vars: {} }, i, 0).write,
          [{ type: "run.created", at: i, data: {} }],
        );
      }
      const claimed = await store.claimRuns(100, 10, plan);
      expect(claimed.map((r) => r.run.id)).toEqual(["run_y"]);
      expect(seen).toEqual([["agent:x by ops at 50: incident 7"], ["agent:x by ops at 50: incident 7"]]);
      expect((await store.getRun("run_x"))?.status).toBe("queued");
    } finally {
      await db.cleanup();
    }
  });
});
