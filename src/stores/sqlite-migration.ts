import type Database from "better-sqlite3";
import { TetherError } from "../engine/errors.js";
import { createLayout3, perRun, storeLayout } from "./sqlite-schema.js";

/**
 * Brings the file to layout 3: creates the tables in a new file, migrates a file an earlier
 * Tether wrote (layout 2: text run ids in every row), refuses a file a newer Tether wrote.
 * Opening a file that is already current reads one pragma and nothing else.
 */
export function ensureLayout(db: Database.Database, path: string): void {
  if (currentLayout(db) === storeLayout) return;
  db.transaction(() => {
    // Checked again under the write lock: another process may have just done it.
    const found = currentLayout(db);
    if (found === storeLayout) return;
    if (found > storeLayout) {
      throw new TetherError("store_too_new", `the store at ${path} has layout ${found}; this Tether reads layout ${storeLayout}. Upgrade Tether to open it.`);
    }
    const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'runs'").all();
    if (tables.length === 0) createLayout3(db);
    else migrateFromLayout2(db);
    db.pragma(`user_version = ${storeLayout}`);
  }).immediate();
}

function currentLayout(db: Database.Database): number {
  return Number(db.pragma("user_version", { simple: true }));
}

/**
 * Layout 2 → layout 3, inside the caller's transaction: every run gets an integer key, and
 * its journal, messages and snapshots are copied under keys built from it; snapshot chains and
 * checksums become an integer and a blob. Commands, effects, halts and tokens are unchanged.
 * Nothing is dropped before its rows are copied, and a failure rolls the whole file back.
 */
export function migrateFromLayout2(db: Database.Database): void {
  for (const index of ["runs_status", "runs_by_status", "runs_updated"]) db.exec(`DROP INDEX IF EXISTS ${index}`);
  for (const table of ["runs", "journal", "messages", "snapshots"]) db.exec(`ALTER TABLE ${table} RENAME TO ${table}_layout2`);
  createLayout3(db);
  db.exec(`
    INSERT INTO runs (rk, id, agent, status, created_at, updated_bucket, lease_until, vars_seq, doc)
      SELECT rowid, id, agent, status, created_at, ((updated_at + 999) / 1000) * 1000, lease_until, vars_seq, doc FROM runs_layout2 ORDER BY rowid;
    INSERT INTO journal (k, type, at, call_seq, data)
      SELECT r.rk * ${perRun} + j.seq, j.type, j.at, j.call_seq, j.data FROM journal_layout2 j JOIN runs r ON r.id = j.run_id;
    INSERT INTO messages (k, body)
      SELECT r.rk * ${perRun} + m.idx, m.body FROM messages_layout2 m JOIN runs r ON r.id = m.run_id;
  `);
  const insert = db.prepare(
    "INSERT INTO snapshots (k, step, msg_count, chain, checksum, schema_version, at, vars, vars_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const rows = db
    .prepare("SELECT r.rk, s.seq, s.step, s.msg_count, s.chain, s.checksum, s.schema_version, s.at, s.vars, s.vars_seq FROM snapshots_layout2 s JOIN runs r ON r.id = s.run_id")
    .all() as Layout2Snapshot[];
  for (const row of rows) {
    insert.run(row.rk * perRun + row.seq, row.step, row.msg_count, chainValue(row.chain), checksumValue(row.checksum), row.schema_version, row.at, row.vars, row.vars_seq);
  }
  for (const table of ["journal", "messages", "snapshots"]) {
    const [copied, original] = [table, `${table}_layout2`].map((name) => (db.prepare(`SELECT count(*) AS n FROM ${name}`).get() as { n: number }).n);
    if (copied !== original) throw new Error(`migration to layout 3 copied ${copied} of ${original} rows of ${table}; nothing was changed`);
  }
  for (const table of ["runs", "journal", "messages", "snapshots"]) db.exec(`DROP TABLE ${table}_layout2`);
}

interface Layout2Snapshot {
  rk: number;
  seq: number;
  step: number;
  msg_count: number;
  chain: string;
  checksum: string;
  schema_version: number;
  at: number;
  vars: string | null;
  vars_seq: number;
}

/** A CRC-32 chain as an integer; anything else (an older schema's chain) is kept as it was, and fails verification as that schema would. */
function chainValue(chain: string): number | string {
  return /^[0-9a-f]{8}$/.test(chain) ? Number.parseInt(chain, 16) : chain;
}

function checksumValue(checksum: string): Buffer | string {
  return /^[0-9a-f]{64}$/.test(checksum) ? Buffer.from(checksum, "hex") : checksum;
}
