import type Database from "better-sqlite3";
import { TetherError } from "../engine/errors.js";
import { snapshotSchemaVersion } from "../engine/store.js";
import {
  checksummedColumns,
  createJournalTable,
  createLayout,
  createLayout3,
  journalTypeCode,
  messagesRowData,
  messagesRowType,
  perRun,
  rowChecksum,
  runChecksummedColumns,
  sqliteRunChecksum,
  storeLayout,
  type ChecksummedRow,
  type RunRow,
} from "./sqlite-schema.js";

/**
 * Brings the file to layout 6: creates the tables in a new file, migrates a file an earlier
 * Tether wrote (layout 5: no run row checksums; layout 4: no row checksums at all; layout 3:
 * messages in a table of their own; layout 2: text run ids in every row; each goes through the
 * next), refuses a file a newer Tether wrote. Opening a file that is already current reads one
 * pragma and nothing else.
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
    if (tables.length === 0) createLayout(db);
    else {
      if (found < 3) migrateFromLayout2(db);
      if (found < 4) migrateFromLayout3(db);
      if (found < 5) migrateFromLayout4(db);
      migrateFromLayout5(db);
    }
    db.pragma(`user_version = ${storeLayout}`);
  }).immediate();
}

function currentLayout(db: Database.Database): number {
  return Number(db.pragma("user_version", { simple: true }));
}

/**
 * Layout 5 → layout 6, inside the caller's transaction: every run row gets its checksum
 * (`sqliteRunChecksum`), computed from the row as it is now, like the journal rows' in layout 5;
 * tombstones of pruned runs included, so no row is left without one (counted).
 */
export function migrateFromLayout5(db: Database.Database): void {
  fillChecksums(db, { table: "runs", columns: runChecksummedColumns, rows: "run rows", layout: 6 }, (row) => sqliteRunChecksum(row as unknown as RunRow));
}

/**
 * Layout 4 → layout 5, inside the caller's transaction: every journal row gets its checksum
 * (`rowChecksum`), computed from the row as it is now, so a byte that was already wrong stays
 * wrong but is never blessed later; the migration counts that no row is left without one.
 */
export function migrateFromLayout4(db: Database.Database): void {
  fillChecksums(db, { table: "journal", columns: checksummedColumns, rows: "journal rows", layout: 5 }, (row) => rowChecksum(row as unknown as ChecksummedRow));
}

/**
 * Adds a table's `crc` column if missing and fills it for every row without one, from the row
 * as it is (a SQL function over `columns`, the columns the checksum covers); throws, and so
 * rolls the caller's transaction back, if any row is left without one.
 */
function fillChecksums(
  db: Database.Database,
  target: { table: string; columns: string; rows: string; layout: number },
  checksum: (row: Record<string, unknown>) => number,
): void {
  const { table } = target;
  const present = db.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[];
  if (!present.includes("crc")) db.exec(`ALTER TABLE ${table} ADD COLUMN crc INTEGER`);
  const names = target.columns.split(", ").filter((c) => c !== "crc");
  const fn = `tether_${table}_checksum`;
  db.function(fn, { deterministic: true, varargs: true }, (...values: unknown[]) => checksum(Object.fromEntries(names.map((name, i) => [name, values[i]]))));
  db.exec(`UPDATE ${table} SET crc = ${fn}(${names.join(", ")}) WHERE crc IS NULL`);
  const left = (db.prepare(`SELECT count(*) AS n FROM ${table} WHERE crc IS NULL`).get() as { n: number }).n;
  if (left !== 0) throw new Error(`migration to layout ${target.layout} left ${left} ${target.rows} without a checksum; nothing was changed`);
}

/**
 * Layout 3 → layout 4, inside the caller's transaction: journal entry `seq` moves from row
 * `seq` to row 2·seq of its run (keys in `vars_key` move with it), and the messages each
 * snapshot appended move from the messages table into one row just before the entry that
 * carries the snapshot. Nothing is dropped before its rows are copied and counted, and any
 * failure rolls the whole file back.
 */
export function migrateFromLayout3(db: Database.Database): void {
  db.exec("ALTER TABLE journal RENAME TO journal_layout3");
  createJournalTable(db);
  const moved = (key: string) => `((${key}) / ${perRun}) * ${perRun} + 2 * ((${key}) % ${perRun})`;
  const columns = "type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars";
  db.exec(`
    INSERT INTO journal (k, ${columns}, vars_key)
      SELECT ${moved("k")}, ${columns}, CASE WHEN vars_key IS NULL THEN NULL ELSE ${moved("vars_key")} END FROM journal_layout3 ORDER BY k;
    UPDATE runs SET vars_key = ${moved("vars_key")} WHERE vars_key > 0;
  `);
  const snapshots = db.prepare("SELECT k, at, msg_count FROM journal_layout3 WHERE snap_seq IS NOT NULL ORDER BY k").all() as { k: number; at: number; msg_count: number }[];
  const bodiesOf = db.prepare("SELECT body FROM messages WHERE k >= ? AND k < ? ORDER BY k").pluck();
  const insert = db.prepare("INSERT INTO journal (k, type, at, data) VALUES (?, ?, ?, ?)");
  let runBase = -1;
  let count = 0;
  let movedMessages = 0;
  for (const snapshot of snapshots) {
    const base = Math.floor(snapshot.k / perRun) * perRun;
    if (base !== runBase) [runBase, count] = [base, 0];
    if (snapshot.msg_count <= count) continue;
    const bodies = bodiesOf.all(base + count, base + snapshot.msg_count) as string[];
    const key = base + 2 * (snapshot.k - base) - 1;
    if (bodies.length > 0) insert.run(key, messagesRowType, snapshot.at, messagesRowData(bodies));
    movedMessages += bodies.length;
    count = snapshot.msg_count;
  }
  const count1 = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
  const entries = { copied: count1("SELECT count(*) AS n FROM journal WHERE type > 0"), original: count1("SELECT count(*) AS n FROM journal_layout3") };
  const messages = { copied: movedMessages, original: count1("SELECT count(*) AS n FROM messages") };
  for (const [what, { copied, original }] of Object.entries({ "journal entries": entries, messages })) {
    if (copied !== original) throw new Error(`migration to layout 4 copied ${copied} of ${original} ${what}; nothing was changed`);
  }
  db.exec("DROP TABLE journal_layout3");
  db.exec("DROP TABLE messages");
}

/**
 * Layout 2 → layout 3, inside the caller's transaction: every run gets an integer key, and its
 * journal and messages are copied under keys built from it. Each snapshot head moves onto a
 * journal entry of its run: the first entry, after the one the previous snapshot went on, not
 * older than the snapshot (the engine wrote every snapshot with entries of the same time).
 * Commands, effects, halts and tokens are unchanged. Nothing is dropped before its rows are
 * copied and counted, and any failure rolls the whole file back.
 */
export function migrateFromLayout2(db: Database.Database): void {
  for (const index of ["runs_status", "runs_by_status", "runs_updated"]) db.exec(`DROP INDEX IF EXISTS ${index}`);
  for (const table of ["runs", "journal", "messages", "snapshots"]) db.exec(`ALTER TABLE ${table} RENAME TO ${table}_layout2`);
  createLayout3(db);
  db.exec(`
    INSERT INTO runs (rk, id, agent, status, created_at, updated_bucket, lease_until, vars_key, doc)
      SELECT rowid, id, agent, status, created_at, ((updated_at + 999) / 1000) * 1000, lease_until, 0, doc FROM runs_layout2 ORDER BY rowid;
    INSERT INTO journal (k, type, at, call_seq, data)
      SELECT r.rk * ${perRun} + j.seq, ${typeCodeSql("j.type")}, j.at, j.call_seq, j.data FROM journal_layout2 j JOIN runs r ON r.id = j.run_id;
    INSERT INTO messages (k, body)
      SELECT r.rk * ${perRun} + m.idx, m.body FROM messages_layout2 m JOIN runs r ON r.id = m.run_id;
  `);
  const entriesOf = db.prepare("SELECT k, at FROM journal WHERE k >= ? AND k < ? ORDER BY k");
  const snapshotsOf = db.prepare("SELECT seq, step, msg_count, chain, checksum, schema_version, at, vars, vars_seq FROM snapshots_layout2 WHERE run_id = ? ORDER BY seq");
  const attach = db.prepare(
    "UPDATE journal SET snap_seq = ?, snap_step = ?, msg_count = ?, chain = ?, checksum = ?, schema_version = ?, snap_at = ?, vars = ?, vars_key = ? WHERE k = ?",
  );
  const setVarsKey = db.prepare("UPDATE runs SET vars_key = ? WHERE rk = ?");
  let moved = 0;
  for (const run of db.prepare("SELECT rk, id FROM runs").all() as { rk: number; id: string }[]) {
    const entries = entriesOf.all(run.rk * perRun, (run.rk + 1) * perRun) as { k: number; at: number }[];
    const keyOfSeq = new Map<number, number>();
    let next = 0;
    let varsKey = 0;
    for (const snapshot of snapshotsOf.all(run.id) as Layout2Snapshot[]) {
      let index = next;
      while (index < entries.length && entries[index].at < snapshot.at) index++;
      if (index === entries.length) index = next;
      const entry = entries[index];
      if (!entry) throw new Error(`run ${run.id} has more snapshots than journal entries to carry them`);
      keyOfSeq.set(snapshot.seq, entry.k);
      varsKey = keyOfSeq.get(snapshot.vars_seq) ?? 0;
      if (varsKey === 0) throw new Error(`snapshot ${snapshot.seq} of run ${run.id} points at vars of snapshot ${snapshot.vars_seq}, which comes after it`);
      attach.run(
        snapshot.seq,
        snapshot.step,
        snapshot.msg_count,
        chainValue(snapshot.chain),
        ...checksumAndSchema(snapshot),
        snapshot.at === entry.at ? null : snapshot.at,
        snapshot.vars,
        varsKey === entry.k ? null : varsKey,
        entry.k,
      );
      next = index + 1;
      moved++;
    }
    setVarsKey.run(varsKey, run.rk);
  }
  const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  const copied = { journal: count("journal"), messages: count("messages"), snapshots: moved };
  const original = { journal: count("journal_layout2"), messages: count("messages_layout2"), snapshots: count("snapshots_layout2") };
  for (const table of ["journal", "messages", "snapshots"] as const) {
    if (copied[table] !== original[table]) throw new Error(`migration to layout 3 copied ${copied[table]} of ${original[table]} ${table}; nothing was changed`);
  }
  for (const table of ["runs", "journal", "messages", "snapshots"]) db.exec(`DROP TABLE ${table}_layout2`);
}

interface Layout2Snapshot {
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

/**
 * Snapshot schema 2 → 3: the checksum keeps its first 128 bits (schema 3 is exactly that).
 * Heads of other schemas are kept as they were, and refused on resume as before.
 */
function checksumAndSchema(snapshot: Layout2Snapshot): [Buffer | string, number] {
  if (snapshot.schema_version === 2 && /^[0-9a-f]{64}$/.test(snapshot.checksum)) return [Buffer.from(snapshot.checksum.slice(0, 32), "hex"), snapshotSchemaVersion];
  return [snapshot.checksum, snapshot.schema_version];
}

/** The code of a type name; an unknown name gives NULL, which the NOT NULL column refuses (and the migration rolls back). */
function typeCodeSql(column: string): string {
  const cases = Object.entries(journalTypeCode).map(([type, code]) => `WHEN '${type}' THEN ${code}`);
  return `CASE ${column} ${cases.join(" ")} END`;
}
