import { afterEach, describe, expect, it } from "vitest";
import pg from "pg";
import { Runtime } from "../engine/runtime.js";
import { ModelRegistry } from "../models/model-registry.js";
import { effectTool, Ledger, sequenceAgent } from "../testing/index.js";
import { tempPostgres, type TempPostgres } from "../testing/temp-postgres.js";
import { migrate, migrations } from "./pg-schema.js";
import type { PostgresStore } from "./pg-store.js";

/**
 * Checksummed rows on PostgreSQL: every journal and message row carries the CRC-32 its writer
 * computed (`row-checksum.ts`, shared with SQLite); a byte changed behind Tether's back (an
 * UPDATE here, standing for a damaged page or a careless hand) is refused on read with a
 * clear error naming the run, and the other runs read and resume as before.
 */

let db: TempPostgres | undefined;
afterEach(async () => {
  await db?.cleanup();
  db = undefined;
});

const ledger = new Ledger();
const agent = sequenceAgent({
  name: "steps",
  tools: [effectTool({ name: "note", ledger, durationMs: 20 })],
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

/** Changes one character in the middle of a text column, as a flipped byte would. */
const flipped = (text: string) => {
  const at = Math.floor(text.length / 2);
  return text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ 0x01) + text.slice(at + 1);
};

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

  it("migration 3 checksums the rows an older Tether wrote, so they read back as before", async () => {
    db = tempPostgres("integrity");
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    const s = `"${db.schema}"`;
    try {
      await pool.query(`CREATE SCHEMA ${s}`);
      await pool.query(`CREATE TABLE ${s}.migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
      for (const migration of migrations.filter((m) => m.version < 3)) {
        await pool.query(migration.sql(s));
        await pool.query(`INSERT INTO ${s}.migrations VALUES ($1, $2, 0)`, [migration.version, migration.name]);
      }
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
