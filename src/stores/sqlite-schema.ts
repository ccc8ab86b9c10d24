import type Database from "better-sqlite3";
import { TetherError } from "../engine/errors.js";
import type { JournalType, SnapshotHead } from "../engine/store.js";

import { runRowChecksum, type ChecksummedRow as AnyChecksummedRow } from "./row-checksum.js";

export { rowChecksum, rowIntact } from "./row-checksum.js";

/** A SQLite journal row as its checksum sees it: keyed by `k`, typed by its one-byte code. */
export interface ChecksummedRow extends AnyChecksummedRow {
  k: number;
  type: number;
}

/**
 * The SQLite store's tables (layout 6, recorded in `PRAGMA user_version`).
 *
 * Every row of `journal` and of `runs` carries a CRC-32 of its own content (`crc`, see
 * `rowChecksum` and `sqliteRunChecksum`), checked whenever the row is read: a flipped byte in a
 * journal entry, a row of messages or a run's record is refused as corrupt instead of being read
 * back as if valid. Layout 5 was the same without the run rows' column, layout 4 without either.
 *
 * A run's rows lie together in one plain rowid table, `journal`, keyed by one integer: the
 * run's key (`runs.rk`) times 2^26 plus the row's number. Journal entry `seq` is row 2·seq; the
 * messages a snapshot appended are one row just before the entry that carries the snapshot
 * (row 2·seq − 1). A snapshot's head (step, message count, chain, checksum, vars when changed)
 * is stored on that entry. Appending a step so touches one leaf page of the table, and a step
 * commits two pages: that leaf and the run's row. Rows of about 1 KB and of a few hundred bytes
 * pack a page closely, where a table of 1 KB messages alone left an eighth of each page empty.
 *
 * Layout 3 kept messages in a table of their own: three pages a step instead of two (a step's
 * commit took about 7 µs more), and 1.48× a 1 KB message's bytes where this layout writes 1.45×.
 * Layout 2 kept a text run id in every row, a primary-key index beside each table and a table
 * of snapshot heads.
 */
export const storeLayout = 6;

/** Rows per run: journal entry numbers stay below half of it. */
export const perRun = 2 ** 26;
/** Run keys stay below this, so every row key is a safe integer in JavaScript. */
const maxRunKey = 2 ** 27;

export function rowKey(rk: number, n: number): number {
  if (n >= perRun) throw new TetherError("store_limit", `a run holds at most ${perRun / 2 - 1} journal entries (run key ${rk}, row ${n})`);
  if (rk >= maxRunKey) throw new TetherError("store_limit", `this store holds at most ${maxRunKey - 1} runs`);
  return rk * perRun + n;
}

/** The key of journal entry `seq` of the run keyed `rk`; the row before it may hold the messages its snapshot appended. */
export function entryKey(rk: number, seq: number): number {
  return rowKey(rk, 2 * seq);
}

/**
 * The `type` of a row of messages. Journal entry types are positive (see `journalTypeCode`), so
 * `type > 0` selects entries and `type <= 0` the rows of messages.
 */
export const messagesRowType = 0;

/** A row of messages' data: one body as it is (a JSON object), several as a JSON array of bodies. */
export function messagesRowData(bodies: readonly string[]): string {
  return bodies.length === 1 ? bodies[0] : JSON.stringify(bodies);
}

/**
 * The bodies in rows of messages, in order: a row of several is told apart by its first
 * character, so a reader needs the data alone. Throws on a row that holds neither.
 */
export function messagesInRows(rows: string[]): string[] {
  if (!rows.some((data) => data.charCodeAt(0) === openBracket)) return rows;
  const bodies: string[] = [];
  for (const data of rows) {
    if (data.charCodeAt(0) !== openBracket) {
      bodies.push(data);
      continue;
    }
    const several: unknown = JSON.parse(data);
    if (!Array.isArray(several) || !several.every((body) => typeof body === "string")) throw new Error("a row of several messages is not a list of message bodies");
    bodies.push(...several);
  }
  return bodies;
}

const openBracket = "[".charCodeAt(0);

/**
 * A journal entry's type as stored: one small integer (one byte on disk, where the name took
 * twelve to twenty-three on every entry). Codes are never changed or reused; a new type takes
 * the next one.
 */
export const journalTypeCode: Readonly<Record<JournalType, number>> = {
  "run.created": 1,
  status: 2,
  "call.started": 3,
  "call.completed": 4,
  "call.failed": 5,
  "call.aborted": 6,
  "call.uncertain": 7,
  "call.resolved": 8,
  "call.progress": 9,
  control: 10,
  "state.message_added": 11,
  "state.patched": 12,
  "compensation.started": 13,
  "compensation.succeeded": 14,
  "compensation.failed": 15,
  "resource.acquired": 16,
  "resource.released": 17,
  "resource.release_failed": 18,
  "budget.tripped": 19,
  recovery: 20,
  "message.queued": 27,
  "message.delivered": 28,
  "webhook.delivery": 30,
  "approval.requested": 31,
  "approval.decided": 32,
  "approval.expired": 33,
};

const journalTypeByCode = new Map(Object.entries(journalTypeCode).map(([type, code]) => [code, type as JournalType]));

export function journalTypeOf(code: number): JournalType {
  const type = journalTypeByCode.get(code);
  if (!type) throw new TetherError("store_error", `unknown journal entry type code ${code}: this file was written by a newer Tether`);
  return type;
}

/** The updated time rounded up to the second: the indexed column moves at most once a second per run. */
export function updatedBucket(updatedAt: number): number {
  return Math.ceil(updatedAt / 1000) * 1000;
}

/**
 * `runs.status` and `runs.updated_bucket` are indexed, so an update writes them only when they
 * change (every other step would otherwise rewrite two index pages as well). `doc` is the run
 * record as JSON.
 */
const runsTable = `
CREATE TABLE runs (
  rk INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  agent TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_bucket INTEGER NOT NULL,
  lease_until INTEGER,
  -- Key of the journal entry holding the vars of the latest snapshot.
  vars_key INTEGER NOT NULL,
  doc TEXT NOT NULL,
  -- sqliteRunChecksum of the row (NULL only in a file layout 5 wrote, until its migration fills it in).
  crc INTEGER
);
CREATE INDEX runs_by_status ON runs(status);
CREATE INDEX runs_by_updated ON runs(updated_bucket);
`;

/** Journal entries (at even row numbers) and the rows of messages their snapshots appended (odd). */
const journalTable = `
CREATE TABLE journal (
  k INTEGER PRIMARY KEY,
  -- See journalTypeCode; messagesRowType (0) on a row of messages.
  type INTEGER NOT NULL,
  at INTEGER NOT NULL,
  call_seq INTEGER,
  -- The entry's data as JSON; on a row of messages, the body or a JSON array of the bodies.
  data TEXT NOT NULL,
  -- The snapshot written in the same transaction, on its last entry; NULL on every other entry.
  snap_seq INTEGER,
  snap_step INTEGER,
  msg_count INTEGER,
  chain INTEGER,
  checksum BLOB,
  schema_version INTEGER,
  -- NULL when the snapshot's time is the entry's.
  snap_at INTEGER,
  -- The agent's vars, only where they changed; vars_key is the key of the entry that holds those
  -- in force, NULL when it is this one.
  vars TEXT,
  vars_key INTEGER,
  -- rowChecksum of the row (NULL only in a file layout 4 wrote, until its migration fills it in).
  crc INTEGER
);
`;

/** Tables layouts 2 and 3 had in the same form. */
export const sharedTables = `
CREATE TABLE IF NOT EXISTS commands (
  id TEXT PRIMARY KEY,
  run_id TEXT,
  type TEXT NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT,
  payload TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  applied_at INTEGER,
  outcome TEXT
);
CREATE INDEX IF NOT EXISTS commands_run ON commands(run_id, created_at);
CREATE TABLE IF NOT EXISTS effects (
  run_id TEXT NOT NULL,
  call_seq INTEGER NOT NULL,
  tool TEXT NOT NULL,
  input TEXT NOT NULL,
  result TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  error TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, call_seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS halts (
  scope TEXT PRIMARY KEY,
  actor TEXT NOT NULL,
  reason TEXT,
  at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
`;

/** Creates the tables of the current layout in a new file. */
export function createLayout(db: Database.Database): void {
  db.exec(runsTable);
  db.exec(journalTable);
  db.exec(sharedTables);
}

/**
 * The tables of layout 3, which the migration from layout 2 builds and the one to layout 4
 * starts from: the same runs and journal, and the messages in a table of their own.
 */
export function createLayout3(db: Database.Database): void {
  db.exec(runsTable);
  db.exec(journalTable);
  db.exec("CREATE TABLE messages (k INTEGER PRIMARY KEY, body TEXT NOT NULL)");
  db.exec(sharedTables);
}

/** Creates the current journal table (the migration from layout 3 moves the old one aside first). */
export function createJournalTable(db: Database.Database): void {
  db.exec(journalTable);
}

/** The columns a reader selects to check a row: `SELECT ${checksummedColumns} FROM journal`. */
export const checksummedColumns = "k, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars_key, crc";

/**
 * The columns of a run row its checksum covers, with `crc`: all but the run key (`rk`, which the
 * row is found by, beside the id the checksum covers).
 */
export const runChecksummedColumns = "id, agent, status, created_at, updated_bucket, lease_until, vars_key, doc, crc";

/** A run row as its checksum sees it. */
export interface RunRow {
  id: string;
  agent: string;
  status: string;
  created_at: number;
  updated_bucket: number;
  lease_until: number | null;
  vars_key: number;
  doc: string;
}

/** A run row's CRC-32: the record (`doc`) and the columns beside it, so a flipped status or lease byte fails too. */
export function sqliteRunChecksum(row: RunRow): number {
  return runRowChecksum([row.id, row.agent, row.status, row.created_at, row.updated_bucket, row.lease_until, row.vars_key], row.doc);
}

/** Whether a run row read back (with `crc`) is the row that was written. */
export function sqliteRunIntact(row: RunRow & { crc: number | null }): boolean {
  return row.crc !== null && row.crc === sqliteRunChecksum(row);
}

/** The snapshot columns of a journal entry that carries a snapshot. */
export interface SnapshotRow {
  k: number;
  at: number;
  snap_seq: number;
  snap_step: number;
  msg_count: number;
  /** An integer, unless the row was written by an older snapshot schema (or tampered with). */
  chain: number | string;
  checksum: Buffer | string;
  schema_version: number;
  snap_at: number | null;
  vars: string | null;
  /** Key of the entry holding the vars in force; NULL when it is this one. */
  vars_key: number | null;
}

/** A snapshot's head as the engine reads it, from its row (`from`: the run's first key) and the seq of the snapshot holding its vars. */
export function snapshotHeadOf(row: SnapshotRow, from: number, varsSeq: number): SnapshotHead {
  return {
    seq: row.snap_seq,
    step: row.snap_step,
    messageCount: row.msg_count,
    chain: typeof row.chain === "number" ? row.chain.toString(16).padStart(8, "0") : String(row.chain),
    checksum: Buffer.isBuffer(row.checksum) ? row.checksum.toString("hex") : String(row.checksum),
    schemaVersion: row.schema_version,
    at: row.snap_at ?? row.at,
    varsSeq,
    entrySeq: (row.k - from) / 2,
  };
}
