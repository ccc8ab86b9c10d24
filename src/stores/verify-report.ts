/**
 * What `tether verify` reports of a store, SQLite (`sqlite-verify.ts`) or PostgreSQL
 * (`pg-verify.ts`): the same shape, so the command prints and exits the same way for both.
 */

/** One damaged thing in a store: a run's row, a table's row, or the file or schema itself. */
export interface StoreDamage {
  /** The run it belongs to, when it belongs to one. */
  runId?: string;
  /** Where: "file", "schema", "journal entry 12", "messages before journal entry 12", "message 3", "run row", "command cmd_…". */
  row: string;
  problem: string;
}

export interface VerifyReport {
  /** The file, or the PostgreSQL URL (without its password) and schema. */
  path: string;
  /** SQLite's layout (`PRAGMA user_version`), PostgreSQL's latest migration. */
  layout: number;
  runs: number;
  /** Journal rows (entries and rows of messages) read and checked. */
  rows: number;
  damage: StoreDamage[];
  /** Runs with at least one damaged row, in order: the rest are intact. */
  damagedRuns: string[];
}
