import { afterEach, describe, expect, it } from "vitest";
import pg from "pg";
import { Runtime } from "../engine/runtime.js";
import type { DamagedRun } from "../engine/store.js";
import { ModelRegistry } from "../models/model-registry.js";
import { effectTool, Ledger, sequenceAgent } from "../testing/index.js";
import { tempPostgres, type TempPostgres } from "../testing/temp-postgres.js";
import { migrate, migrations, pgRunColumns, pgRunIntact, type PgRunRow } from "./pg-schema.js";
import type { PostgresStore } from "./pg-store.js";
import { verifyPostgresStore } from "./pg-verify.js";

/**
 * Checksummed rows on PostgreSQL: every journal, message and run row carries the CRC-32 its
 * writer computed (`row-checksum.ts`, shared with SQLite); a byte changed behind Tether's back (an
 * UPDATE here, standing for a damaged page or a careless hand) is refused on read with a
 * clear error naming the run, named by `verifyPostgresStore` (`tether verify --database-url`),
 * and the other runs read and resume as before.
 */

let db: TempPostgres | undefined;
afterEach(async () => {
  await db?.cleanup();
  db = undefined;
});

const ledger = new Ledger();
const agent = sequenceAgent({
  name: "steps",
  // Slow enough steps that the third run is still running when it is paused after its second (it could complete first under load).
  tools: [effectTool({ name: "note", ledger, durationMs: 50 })],
  steps: Array.from({ length: 6 }, (_, i) => ({ tool: "note", input: { id: `note-${i}` } })),
});

function runtimeOn(store: PostgresStore): Runtime {
  return new Runtime({ agents: [agent], store, resolveModel: new ModelRegistry().resolver, workerPollMs: 10, leaseMs: 300 });
}

/** Two completed runs and one paused after its second step. */
async function storeWithRuns(): Promise<{ done: string[]; paused: string }> {
  db = tempPostgres("integrity");
  const store = await db.open().open();
  const runtime = runtimeOn(store);
  runtime.startWorker();
  const done: string[] = [];
  for (let i = 0; i < 2; i++) done.push((await runtime.start("steps", { n: i })).id);
  const paused = (await runtime.start("steps", { n: 2 })).id;
  await runtime.waitFor(paused, (r) => r.step >= 2);
  await runtime.pause(paused, { wait: true });
  for (const id of done) await runtime.waitFor(id, ["completed"]);
  await runtime.close();
  return { done, paused };
}

/** A fourth run, completed, on the same schema. */
async function startedRun(): Promise<string> {
  const store = await db!.open().open();
  const runtime = runtimeOn(store);
  runtime.startWorker();
  try {
    const id = (await runtime.start("steps", { n: 3 })).id;
    await runtime.waitFor(id, ["completed"]);
    return id;
  } finally {
    await runtime.close();
  }
}

/** Runs SQL on the test schema from outside Tether. */
async function sql(text: string, params: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: db!.url });
  await client.connect();
  try {
    return await client.query(text.replaceAll("S.", `"${db!.schema}".`), params);
  } finally {
    await client.end();
  }
}

/** What `tether verify --database-url` reports of the test schema. */
const verify = () => verifyPostgresStore({ connectionString: db!.url, schema: db!.schema, path: "test" });

/** Changes one character in the middle of a text column, as a flipped byte would. */
const flipped = (text: string) => {
  const at = Math.floor(text.length / 2);
  return text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ 0x01) + text.slice(at + 1);
};

/** A schema as a Tether that knew the migrations before `version` left it. */
async function schemaBefore(pool: pg.Pool, s: string, version: number): Promise<void> {
  await pool.query(`CREATE SCHEMA ${s}`);
  await pool.query(`CREATE TABLE ${s}.migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
  for (const migration of migrations.filter((m) => m.version < version)) {
    await pool.query(migration.sql(s));
    await pool.query(`INSERT INTO ${s}.migrations VALUES ($1, $2, 0)`, [migration.version, migration.name]);
  }
}

describe("checksummed rows (PostgreSQL)", () => {
  it("a byte changed in a completed run's stored message: snapshot_corrupt naming the run on read; its journal and the other runs read, the paused one resumes", async () => {
    const { done, paused } = await storeWithRuns();
    const { rows } = await sql("SELECT idx, body FROM S.messages WHERE run_id = $1 ORDER BY idx DESC LIMIT 1", [done[0]]);
    await sql("UPDATE S.messages SET body = $3 WHERE run_id = $1 AND idx = $2", [done[0], rows[0].idx, flipped(rows[0].body)]);

    const store = await db!.open().open();
    const runtime = runtimeOn(store);
    try {
      await expect(store.loadState(done[0])).rejects.toMatchObject({ code: "snapshot_corrupt", details: { runId: done[0] } });
      await expect(store.loadState(done[0])).rejects.toThrow(`run ${done[0]} cannot resume: its snapshot is corrupt (message ${rows[0].idx} before snapshot`);
      await expect(store.readMessages(done[0], [rows[0].idx])).rejects.toMatchObject({ code: "snapshot_corrupt" });
      expect((await store.readJournal(done[0])).length).toBeGreaterThan(10);
      expect((await store.loadState(done[1])).messages.length).toBeGreaterThan(5);
      runtime.startWorker();
      await runtime.resume(paused, { actor: "test" });
      expect((await runtime.waitFor(paused, ["completed", "failed"])).status).toBe("completed");
    } finally {
      await runtime.close();
    }
  });

  it("a byte changed in a journal entry: store_corrupt naming the run and the entry; the snapshot row refuses with snapshot_corrupt; other runs read", async () => {
    const { done, paused } = await storeWithRuns();
    const entry = (await sql("SELECT seq, data FROM S.journal WHERE run_id = $1 AND type = 'call.completed' ORDER BY seq LIMIT 1", [done[0]])).rows[0];
    await sql("UPDATE S.journal SET data = $3 WHERE run_id = $1 AND seq = $2", [done[0], entry.seq, flipped(entry.data)]);
    const head = (await sql("SELECT seq FROM S.journal WHERE run_id = $1 AND snap_seq IS NOT NULL ORDER BY seq DESC LIMIT 1", [done[1]])).rows[0];
    await sql("UPDATE S.journal SET msg_count = msg_count - 1 WHERE run_id = $1 AND seq = $2", [done[1], head.seq]);

    const store = await db!.open().open();
    await expect(store.readJournal(done[0])).rejects.toMatchObject({ code: "store_corrupt", details: { runId: done[0], seq: entry.seq } });
    await expect(store.readJournal(done[0])).rejects.toThrow(`run ${done[0]}: journal entry ${entry.seq} fails its checksum`);
    await expect(store.loadState(done[1])).rejects.toMatchObject({ code: "snapshot_corrupt", details: { runId: done[1] } });
    // The snapshot row is a journal entry too; entries before a damaged one still read, and the untouched run reads whole.
    await expect(store.readJournal(done[1])).rejects.toMatchObject({ code: "store_corrupt", details: { runId: done[1], seq: head.seq } });
    expect((await store.readJournal(done[0], { limit: entry.seq - 1 })).length).toBe(entry.seq - 1);
    expect((await store.readJournal(paused)).length).toBeGreaterThan(5);
    expect((await store.loadState(paused)).head.step).toBeGreaterThanOrEqual(2);
  });

  it("a byte changed in a completed run's record (still valid JSON: its output 6 reads 7): get refused with store_corrupt naming the run row; a listing names it and shows the other runs; nothing deleted; the other runs read, the paused one resumes", async () => {
    const { done, paused } = await storeWithRuns();
    const { doc } = (await sql("SELECT doc FROM S.runs WHERE id = $1", [done[0]])).rows[0] as { doc: string };
    const digit = doc.indexOf('"output":6') + '"output":'.length;
    expect(digit).toBeGreaterThan(10);
    await sql("UPDATE S.runs SET doc = $2 WHERE id = $1", [done[0], doc.slice(0, digit) + "7" + doc.slice(digit + 1)]);

    expect((await verify()).damage).toEqual([{ runId: done[0], row: "run row", problem: "fails its checksum" }]);
    const store = await db!.open().open();
    const runtime = runtimeOn(store);
    try {
      await expect(store.getRun(done[0])).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: done[0] }) });
      await expect(store.getRun(done[0])).rejects.toThrow(`run ${done[0]}: its run row fails its checksum`);
      // A listing passes over it, never showing the altered record, names it, and lists the other runs.
      const damaged: DamagedRun[] = [];
      expect((await store.listRuns({}, damaged)).map((r) => r.id).sort()).toEqual([done[1], paused].sort());
      expect(damaged).toEqual([{ id: done[0], agent: "steps", status: "completed", code: "store_corrupt", message: expect.stringContaining(`run ${done[0]}: its run row fails its checksum`) }]);
      // An update of it is refused too, and writes nothing.
      await expect(store.update({ runId: done[0], set: { statusReason: "x" } })).rejects.toMatchObject({ code: "store_corrupt" });
      expect(JSON.parse((await sql("SELECT doc FROM S.runs WHERE id = $1", [done[0]])).rows[0].doc).output).toBe(7);
      expect((await store.getRun(done[1]))?.output).toBe(6);
      expect((await store.readJournal(done[0])).length).toBeGreaterThan(10);
      runtime.startWorker();
      await runtime.resume(paused, { actor: "test" });
      expect((await runtime.waitFor(paused, ["completed", "failed"])).output).toBe(6);
      // A prune of every finished run passes over the damaged one: its rows stay for a person to look at.
      const pruned = await store.prune({ before: Date.now() + 60_000, batchSize: 1 });
      expect(pruned.runs).toBe(2);
      expect(await store.getRun(done[1])).toBeUndefined();
      expect(JSON.parse((await sql("SELECT doc FROM S.runs WHERE id = $1", [done[0]])).rows[0].doc).output).toBe(7);
      expect(Number((await sql("SELECT count(*) AS n FROM S.journal WHERE run_id = $1", [done[0]])).rows[0].n)).toBeGreaterThan(10);
    } finally {
      await runtime.close();
    }
  });

  it("a completed run's status changed behind Tether's back (to queued): passed over by the claims, never run again; other runs are claimed and run; verify names its run row", async () => {
    const { done } = await storeWithRuns();
    await sql("UPDATE S.runs SET status = 'queued' WHERE id = $1", [done[1]]);
    expect((await verify()).damage).toEqual([{ runId: done[1], row: "run row", problem: "fails its checksum" }]);
    const store = await db!.open().open();
    const runtime = runtimeOn(store);
    try {
      const entries = (await store.readJournal(done[1])).length;
      expect(await store.findClaimable(Date.now(), 10)).toEqual([]);
      expect(await store.claimRuns(Date.now(), 10, () => ({ claim: { workerId: "w", until: Date.now() + 1000 } }))).toEqual([]);
      await expect(store.getRun(done[1])).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: done[1] }) });
      runtime.startWorker();
      const fresh = (await runtime.start("steps", { n: 9 })).id;
      expect((await runtime.waitFor(fresh, ["completed"])).output).toBe(6);
      expect((await store.readJournal(done[1])).length).toBe(entries);
      expect((await store.getRun(done[0]))?.status).toBe("completed");
    } finally {
      await runtime.close();
    }
  });

  it("a paused run's record damaged: halt halts every other active run and names it with store_corrupt; unhalt lifts the others and names the halted run it cannot change", async () => {
    const { paused } = await storeWithRuns();
    const { doc } = (await sql("SELECT doc FROM S.runs WHERE id = $1", [paused])).rows[0] as { doc: string };
    const { step } = JSON.parse(doc) as { step: number };
    await sql("UPDATE S.runs SET doc = $2 WHERE id = $1", [paused, doc.replace(`"step":${step},`, `"step":${step + 1},`)]);
    const store = await db!.open().open();
    // No worker: the runs it starts wait queued, active runs the halt must reach.
    const runtime = new Runtime({ agents: [agent], store, resolveModel: new ModelRegistry().resolver, worker: false });
    try {
      const fresh = [(await runtime.start("steps", { n: 7 })).id, (await runtime.start("steps", { n: 8 })).id];
      const halt = await runtime.halt({ actor: "test", reason: "drill" });
      expect([...halt.halted].sort()).toEqual([...fresh].sort());
      expect(halt.failed).toEqual([{ runId: paused, code: "store_corrupt", message: expect.stringContaining(`run ${paused}: its run row fails its checksum`) }]);
      for (const id of fresh) expect((await store.getRun(id))?.status).toBe("halted");
      expect((await store.listHalts()).map((h) => h.scope)).toEqual(["*"]);
      expect(JSON.parse((await sql("SELECT doc FROM S.runs WHERE id = $1", [paused])).rows[0].doc).step).toBe(step + 1);

      await sql("UPDATE S.runs SET lease_until = 1 WHERE id = $1", [fresh[0]]);
      const lifted = await runtime.unhalt({ actor: "test" });
      expect(lifted.paused).toEqual([fresh[1]]);
      expect(lifted.failed).toEqual([{ runId: fresh[0], code: "store_corrupt", message: expect.stringContaining(`run ${fresh[0]}: its run row fails its checksum`) }]);
      expect((await store.getRun(fresh[1]))?.status).toBe("paused");
      expect(await store.listHalts()).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("verify reads every row of a healthy schema (completed, paused, with snapshots) and finds nothing; then names exactly the runs whose journal, message and run rows were changed", async () => {
    const { done, paused } = await storeWithRuns();
    const healthy = await verify();
    expect(healthy.damage).toEqual([]);
    expect(healthy.runs).toBe(3);
    expect(healthy.layout).toBe(migrations.at(-1)!.version);
    expect(healthy.rows).toBeGreaterThan(40);

    const third = await startedRun();
    const entry = (await sql("SELECT seq, data FROM S.journal WHERE run_id = $1 AND type = 'call.completed' ORDER BY seq LIMIT 1", [done[0]])).rows[0];
    await sql("UPDATE S.journal SET data = $3 WHERE run_id = $1 AND seq = $2", [done[0], entry.seq, flipped(entry.data)]);
    const message = (await sql("SELECT idx, body FROM S.messages WHERE run_id = $1 ORDER BY idx DESC LIMIT 1", [paused])).rows[0];
    await sql("UPDATE S.messages SET body = $3 WHERE run_id = $1 AND idx = $2", [paused, message.idx, flipped(message.body)]);
    const { doc } = (await sql("SELECT doc FROM S.runs WHERE id = $1", [third])).rows[0] as { doc: string };
    await sql("UPDATE S.runs SET doc = $2 WHERE id = $1", [third, doc.replace('"status":"completed"', '"status":"completec"')]);

    const report = await verify();
    expect(report.runs).toBe(4);
    expect(report.damage).toEqual(
      expect.arrayContaining([
        { runId: done[0], row: `journal entry ${entry.seq}`, problem: "fails its checksum" },
        { runId: paused, row: `message ${message.idx}`, problem: "fails its checksum" },
        { runId: third, row: "run row", problem: "fails its checksum" },
      ]),
    );
    expect(report.damage.length).toBe(3);
    expect([...report.damagedRuns].sort()).toEqual([done[0], paused, third].sort());
    // Read only: nothing it found was changed or removed.
    expect((await sql("SELECT body FROM S.messages WHERE run_id = $1 AND idx = $2", [paused, message.idx])).rows[0].body).toBe(flipped(message.body));
  });

  it("migration 4 checksums the run rows an older Tether wrote, a page at a time, so they read back as before", async () => {
    db = tempPostgres("integrity");
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    const s = `"${db.schema}"`;
    try {
      await schemaBefore(pool, s, 4);
      // More runs than one page of the migration's (500).
      await pool.query(`INSERT INTO ${s}.runs (id, agent, status, created_at, updated_at, lease_until, epoch, version, vars_seq, doc, updated_bucket)
        SELECT 'run_' || lpad(n::text, 4, '0'), 'steps', 'completed', 1000 + n, 2000 + n, CASE WHEN n % 2 = 0 THEN NULL ELSE 5000 END, 1, 3, 0,
          json_build_object('id', 'run_' || lpad(n::text, 4, '0'), 'status', 'completed', 'output', n)::text, 60000
        FROM generate_series(1, 1201) AS n`);
      await migrate(pool, db.schema);
      const rows = (await pool.query<PgRunRow & { crc: string | null }>(`SELECT ${pgRunColumns} FROM ${s}.runs`)).rows;
      expect(rows.length).toBe(1201);
      expect(rows.filter((row) => !pgRunIntact(row))).toEqual([]);
    } finally {
      await pool.end();
    }
    const store = await db.open().open();
    expect(await store.getRun("run_0777")).toEqual({ id: "run_0777", status: "completed", output: 777 });
  });

  it("migration 3 checksums the rows an older Tether wrote, so they read back as before", async () => {
    db = tempPostgres("integrity");
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    const s = `"${db.schema}"`;
    try {
      await schemaBefore(pool, s, 3);
      await pool.query(`INSERT INTO ${s}.journal (run_id, seq, type, at, call_seq, data) VALUES ('run_old', 1, 'status', 5, NULL, '{"to":"queued"}')`);
      await pool.query(`INSERT INTO ${s}.messages (run_id, idx, body) VALUES ('run_old', 0, '{"role":"user","content":"hi"}')`);
      await migrate(pool, db.schema);
    } finally {
      await pool.end();
    }
    const store = await db.open().open();
    expect(await store.readJournal("run_old")).toEqual([{ runId: "run_old", seq: 1, type: "status", at: 5, data: { to: "queued" } }]);
    expect(await store.readMessages("run_old", [0])).toEqual(new Map([[0, '{"role":"user","content":"hi"}']]));
  });
});
