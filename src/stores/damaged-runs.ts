import { StoreCorruptError } from "../engine/errors.js";
import type { DamagedRun, RunRecord } from "../engine/store.js";

/**
 * The records of a listing's rows, read by `read` (which refuses a row whose checksum fails with
 * `store_corrupt`): a damaged row is passed over and named in `damaged`, so the other runs are
 * still listed. Any other error is thrown as it is.
 */
export function intactRecords<Row extends { id: string; agent: string; status: string }>(rows: readonly Row[], read: (row: Row) => RunRecord, damaged?: DamagedRun[]): RunRecord[] {
  const records: RunRecord[] = [];
  for (const row of rows) {
    try {
      records.push(read(row));
    } catch (error) {
      if (!(error instanceof StoreCorruptError)) throw error;
      damaged?.push({ id: row.id, agent: row.agent, status: row.status, code: error.code, message: error.message });
    }
  }
  return records;
}
