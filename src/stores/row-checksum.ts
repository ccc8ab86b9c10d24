import { crc32 } from "node:zlib";

/**
 * The CRC-32 every journal, message and run row of both stores carries (`crc`), computed once
 * when the row is written and checked on every read: a flipped byte or a torn page is reported as
 * `store_corrupt` / `snapshot_corrupt` for the run it belongs to, never read back as valid.
 */

/** The columns of a journal row its checksum covers: all but `vars`, which the snapshot's own checksum covers. */
export interface ChecksummedRow {
  /** Where the row lives: SQLite's row key, or PostgreSQL's run id and seq (`rowKey`). */
  k: number | string;
  /** SQLite's one-byte code, PostgreSQL's name. */
  type: number | string;
  at: number;
  call_seq: number | null;
  data: string;
  snap_seq?: number | null;
  snap_step?: number | null;
  msg_count?: number | null;
  chain?: number | string | null;
  checksum?: Buffer | string | null;
  schema_version?: number | null;
  snap_at?: number | null;
  /** SQLite's key, PostgreSQL's seq, of the entry holding the vars in force. */
  vars_key?: number | null;
}

const text = (value: unknown): string => (value === null || value === undefined ? "" : Buffer.isBuffer(value) ? value.toString("hex") : String(value));

/**
 * A journal row's CRC-32, over its key (a row copied to another place fails), its type, time,
 * call, snapshot head and data. Cheap next to the write (a few microseconds for a 1 KB row), and
 * enough to catch flipped bytes and torn pages; a deliberate forgery is not what it is for.
 */
export function rowChecksum(row: ChecksummedRow): number {
  const head = row.snap_seq === null || row.snap_seq === undefined
    ? ""
    : [row.snap_seq, row.snap_step, row.msg_count, row.chain, row.checksum, row.schema_version, row.snap_at, row.vars_key].map(text).join(",");
  return crc32(row.data, crc32(`${row.k}|${row.type}|${row.at}|${text(row.call_seq)}|${head}|`));
}

/** Whether a row read back (with `crc`) is the row that was written. */
export function rowIntact(row: ChecksummedRow & { crc: number | null }): boolean {
  return row.crc !== null && row.crc === rowChecksum(row);
}

/** PostgreSQL's journal row: keyed by run and seq, so a row copied to another run or place fails. */
export function pgJournalKey(runId: string, seq: number): string {
  return `${runId}:${seq}`;
}

/** A PostgreSQL message row's CRC-32, over its run, index and body. */
export function messageChecksum(runId: string, idx: number, body: string): number {
  return crc32(body, crc32(`${runId}|m${idx}|`));
}

/**
 * A run row's CRC-32: over the columns each store keeps beside the record (its id, status, lease
 * and the rest: `sqliteRunChecksum`, `pgRunChecksum` list them) and the record itself (`doc`).
 * The record is rewritten by every step, so this is the one checksum computed on every write: a
 * few microseconds for a few kilobytes of JSON.
 */
export function runRowChecksum(columns: readonly unknown[], doc: string): number {
  return crc32(doc, crc32(`run|${columns.map(text).join("|")}|`));
}
