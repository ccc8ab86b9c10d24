import pg from "pg";
import { TetherError } from "../engine/errors.js";
import type { RunRecord } from "../engine/store.js";
import { messageChecksum, pgJournalKey, rowChecksum, runRowChecksum, type ChecksummedRow } from "./row-checksum.js";

/**
 * The PostgreSQL store's tables, created and migrated by versioned migrations recorded in
 * `<schema>.migrations`. A migration is never edited once released: a change is a new one.
 *
 * `runs` keeps the run record as JSON text in `doc`, beside the columns the database itself
 * checks or searches: `version` (every write is a compare-and-swap on it), `epoch` (the fencing
 * token of the lease, checked by the database on every worker's write), `status` and
 * `lease_until` (claiming), `updated_at` (change feeds). A journal entry may carry the snapshot
 * written with it (the same shape as the SQLite store: vars only when they changed, `vars_seq`
 * naming the entry that holds those in force); messages are appended one row each, so a step
 * writes only what it added whatever the length of the history.
 */
export const migrations: readonly {
  version: number;
  name: string;
  sql: (schema: string) => string;
  /** What SQL cannot do, run after `sql` in the same transaction. */
  fill?: (client: pg.PoolClient, schema: string) => Promise<void>;
}[] = [
  {
    version: 1,
    name: "runs, journal, messages, commands, effects, halts, tokens",
    sql: (s) => `
CREATE TABLE ${s}.runs (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  lease_until BIGINT,
  epoch INTEGER NOT NULL,
  version INTEGER NOT NULL,
  -- The journal entry holding the vars of the latest snapshot.
  vars_seq INTEGER NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX runs_by_status ON ${s}.runs (status, updated_at);
CREATE INDEX runs_by_created ON ${s}.runs (created_at DESC, id);
CREATE INDEX runs_by_updated ON ${s}.runs (updated_at);
CREATE TABLE ${s}.journal (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  at BIGINT NOT NULL,
  call_seq INTEGER,
  data TEXT NOT NULL,
  -- The snapshot written with this entry; NULL on every other entry.
  snap_seq INTEGER,
  snap_step INTEGER,
  msg_count INTEGER,
  chain TEXT,
  checksum TEXT,
  schema_version INTEGER,
  snap_at BIGINT,
  -- The agent's vars, only where they changed; vars_seq names the entry holding those in force
  -- (NULL when it is this one).
  vars TEXT,
  vars_seq INTEGER,
  PRIMARY KEY (run_id, seq)
);
CREATE INDEX journal_snapshots ON ${s}.journal (run_id, snap_step) WHERE snap_seq IS NOT NULL;
CREATE TABLE ${s}.messages (
  run_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, idx)
);
CREATE TABLE ${s}.commands (
  id TEXT PRIMARY KEY,
  run_id TEXT,
  type TEXT NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT,
  payload TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  n BIGSERIAL,
  applied_at BIGINT,
  outcome TEXT
);
CREATE INDEX commands_run ON ${s}.commands (run_id, created_at, n);
CREATE TABLE ${s}.effects (
  run_id TEXT NOT NULL,
  call_seq INTEGER NOT NULL,
  tool TEXT NOT NULL,
  input TEXT NOT NULL,
  result TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  error TEXT,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (run_id, call_seq)
);
CREATE TABLE ${s}.halts (
  scope TEXT PRIMARY KEY,
  actor TEXT NOT NULL,
  reason TEXT,
  at BIGINT NOT NULL
);
CREATE TABLE ${s}.tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
`,
  },
  {
    version: 2,
    name: "runs updated in place (HOT): no index on a column every step writes",
    // Every step rewrote four index entries of `runs` (its updated time was indexed) and one of the
    // journal's snapshot index. Now the indexes name only columns that change a few times in a
    // run's life (status, the updated time rounded up to the minute), so PostgreSQL updates the row
    // in place (a heap-only tuple, room left by the fill factor); the latest snapshot is found by
    // walking the journal's primary key backwards.
    sql: (s) => `
ALTER TABLE ${s}.runs SET (fillfactor = 70);
ALTER TABLE ${s}.runs ADD COLUMN updated_bucket BIGINT;
UPDATE ${s}.runs SET updated_bucket = ((updated_at + 59999) / 60000) * 60000;
ALTER TABLE ${s}.runs ALTER COLUMN updated_bucket SET NOT NULL;
DROP INDEX ${s}.runs_by_status;
DROP INDEX ${s}.runs_by_updated;
CREATE INDEX runs_by_status ON ${s}.runs (status, updated_bucket);
CREATE INDEX runs_by_updated ON ${s}.runs (updated_bucket);
DROP INDEX ${s}.journal_snapshots;
`,
  },
  {
    version: 3,
    name: "a CRC-32 on every journal and message row, checked on every read",
    // The same checksum as the SQLite store's rows (`row-checksum.ts`), computed by the writer
    // once per row. Rows written before are checksummed here as they are now.
    sql: (s) => `
ALTER TABLE ${s}.journal ADD COLUMN crc BIGINT;
ALTER TABLE ${s}.messages ADD COLUMN crc BIGINT;
`,
    fill: fillChecksums,
  },
  {
    version: 4,
    name: "a CRC-32 on every run row, checked on every read",
    // The run's record and the columns beside it (`pgRunChecksum`), computed by every write of the
    // row. Rows written before are checksummed here as they are now.
    sql: (s) => `ALTER TABLE ${s}.runs ADD COLUMN crc BIGINT;`,
    fill: fillRunChecksums,
  },
];

/** BIGINT columns hold millisecond times: read them as numbers (pg reads them as strings). */
const int8 = 20;
export const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === int8) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as "text");
  },
};

/** The columns of a run row its checksum covers, with `crc`: all but `updated_bucket`, which a lease renewal leaves as it was. */
export const pgRunColumns = "id, agent, status, created_at, updated_at, lease_until, epoch, version, vars_seq, doc, crc";

/** A run row as its checksum sees it. */
export interface PgRunRow {
  id: string;
  agent: string;
  status: string;
  created_at: number;
  updated_at: number;
  lease_until: number | null;
  epoch: number;
  version: number;
  vars_seq: number;
  doc: string;
}

/** The run row a write of `record` leaves (`doc` is the record as JSON), as its checksum sees it. */
export function runRowOf(record: RunRecord, varsSeq: number, doc: string): PgRunRow {
  return {
    id: record.id,
    agent: record.agent,
    status: record.status,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    lease_until: record.lease?.until ?? null,
    epoch: record.epoch,
    version: record.version,
    vars_seq: varsSeq,
    doc,
  };
}

/** A run row's CRC-32: the record (`doc`) and the columns beside it, so a flipped status, epoch or version fails too. */
export function pgRunChecksum(row: PgRunRow): number {
  return runRowChecksum([row.id, row.agent, row.status, row.created_at, row.updated_at, row.lease_until, row.epoch, row.version, row.vars_seq], row.doc);
}

/** Whether a run row read back (with `crc`) is the row that was written. */
export function pgRunIntact(row: PgRunRow & { crc: number | string | null }): boolean {
  return row.crc !== null && Number(row.crc) === pgRunChecksum(row);
}

/** The run rows, a page at a time (a big schema is never read whole), each checksummed as it is now. */
async function fillRunChecksums(client: pg.PoolClient, s: string): Promise<void> {
  for (let after = ""; ; ) {
    const { rows } = await client.query<PgRunRow>(`SELECT ${pgRunColumns.replace(", crc", "")} FROM ${s}.runs WHERE id > $1 ORDER BY id LIMIT 500`, [after]);
    if (rows.length === 0) break;
    const batch = rows.map((row) => ({ id: row.id, crc: pgRunChecksum(row) }));
    await client.query(`UPDATE ${s}.runs AS r SET crc = x.crc FROM json_to_recordset($1::json) AS x(id text, crc bigint) WHERE r.id = x.id`, [JSON.stringify(batch)]);
    after = rows[rows.length - 1].id;
  }
  const left = (await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${s}.runs WHERE crc IS NULL`)).rows[0].n;
  if (Number(left) !== 0) throw new Error(`migration 4 left ${left} run rows without a checksum; nothing was changed`);
}

/** The columns of a journal row its checksum covers, with `crc`. */
export const pgChecksummedColumns = "seq, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars_seq, crc";

/** The checksummed columns of a PostgreSQL journal row: the shared ones, keyed by `seq`, with `vars_seq` for SQLite's `vars_key`. */
export type PgChecksummedRow = Omit<ChecksummedRow, "k" | "type" | "vars_key" | "chain" | "checksum"> & {
  seq: number;
  type: string;
  chain?: string | null;
  checksum?: string | null;
  vars_seq?: number | null;
};

/** A PostgreSQL journal row's CRC-32 (the SQLite store's `rowChecksum`, keyed by run and seq). */
export function pgRowChecksum(runId: string, row: PgChecksummedRow): number {
  return rowChecksum({ ...row, k: pgJournalKey(runId, row.seq), vars_key: row.vars_seq });
}

/** Whether a journal row read back (with `crc`) is the row that was written. */
export function pgRowIntact(runId: string, row: PgChecksummedRow & { crc: number | string | null }): boolean {
  return row.crc !== null && Number(row.crc) === pgRowChecksum(runId, row);
}

/** Whether a message row read back is the row that was written. */
export function pgMessageIntact(runId: string, row: { idx: number; body: string; crc: number | string | null }): boolean {
  return row.crc !== null && Number(row.crc) === messageChecksum(runId, row.idx, row.body);
}

async function fillChecksums(client: pg.PoolClient, s: string): Promise<void> {
  const journal = await client.query<PgChecksummedRow & { run_id: string }>(`SELECT run_id, ${pgChecksummedColumns.replace(", crc", "")} FROM ${s}.journal`);
  for (let i = 0; i < journal.rows.length; i += 1000) {
    const batch = journal.rows.slice(i, i + 1000).map((row) => ({ run_id: row.run_id, seq: row.seq, crc: pgRowChecksum(row.run_id, row) }));
    await client.query(`UPDATE ${s}.journal AS j SET crc = x.crc FROM json_to_recordset($1::json) AS x(run_id text, seq int, crc bigint) WHERE j.run_id = x.run_id AND j.seq = x.seq`, [JSON.stringify(batch)]);
  }
  const messages = await client.query<{ run_id: string; idx: number; body: string }>(`SELECT run_id, idx, body FROM ${s}.messages`);
  for (let i = 0; i < messages.rows.length; i += 1000) {
    const batch = messages.rows.slice(i, i + 1000).map((row) => ({ run_id: row.run_id, idx: row.idx, crc: messageChecksum(row.run_id, row.idx, row.body) }));
    await client.query(`UPDATE ${s}.messages AS m SET crc = x.crc FROM json_to_recordset($1::json) AS x(run_id text, idx int, crc bigint) WHERE m.run_id = x.run_id AND m.idx = x.idx`, [JSON.stringify(batch)]);
  }
}

/** The updated time rounded up to the minute, the indexed `runs.updated_bucket`: it moves at most once a minute per run. */
export function updatedBucket(updatedAt: number): number {
  return Math.ceil(updatedAt / 60_000) * 60_000;
}

/** A quoted SQL identifier; schema names come from configuration. */
export function quoteIdentifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new TetherError("invalid_input", `schema name ${JSON.stringify(name)} is not a plain SQL identifier (letters, digits and _, at most 63)`);
  }
  return `"${name}"`;
}

/**
 * Creates the schema and applies every migration it has not seen, under an advisory lock so
 * that workers starting together migrate once. Refuses a schema migrated by a newer Tether.
 */
export async function migrate(pool: pg.Pool, schema: string, options: { create: boolean; where: string } = { create: true, where: "PostgreSQL" }): Promise<void> {
  const s = quoteIdentifier(schema);
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`tether:${schema}`]);
    if (!options.create) {
      const found = await client.query<{ table: string | null }>("SELECT to_regclass($1)::text AS table", [`${s}.migrations`]);
      if (found.rows[0].table === null) {
        throw new TetherError(
          "not_found",
          `no Tether store in schema ${schema} at ${options.where}: check the schema (?schema=, default tether); \`tether start\`, \`tether serve\` or \`tether worker\` create one`,
        );
      }
    }
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
    const applied = new Set((await client.query<{ version: number }>(`SELECT version FROM ${s}.migrations`)).rows.map((row) => Number(row.version)));
    const newest = Math.max(0, ...applied);
    const known = migrations[migrations.length - 1].version;
    if (newest > known) {
      throw new TetherError("store_too_new", `the PostgreSQL schema ${schema} was migrated by a newer Tether (migration ${newest}; this one knows up to ${known}): upgrade Tether`);
    }
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      await client.query(migration.sql(s));
      await migration.fill?.(client, s);
      await client.query(`INSERT INTO ${s}.migrations (version, name, applied_at) VALUES ($1, $2, $3)`, [migration.version, migration.name, Date.now()]);
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
