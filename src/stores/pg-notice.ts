import type { RunRecord } from "../engine/store.js";
import { pgRunChecksum, runRowOf } from "./pg-schema.js";

/**
 * What a notification on `<schema>_runs` carries. A write its executing worker did not make (a
 * pause, a cancel, a claim) notifies the run's new row when it fits PostgreSQL's payload limit
 * (8,000 bytes), so the worker that executes the run takes it from the notification instead of
 * reading it: one round trip less between a person's pause and the run stopping, on a worker
 * whose event loop is busy. A bigger row is named by its id alone, and read; `"*"` says anything
 * may have changed (a halt).
 *
 * The row form is `row:<version>:<vars_seq>:<crc>:<run id>` and the record as JSON on the next
 * line, with the checksum its row is stored with: the run is named without parsing the record (a
 * worker parses only the rows of runs it works on), and a row whose
 * checksum does not match, or that does not parse, is never adopted (its run is read instead).
 */
export interface RunNotice {
  /** The run, or `"*"`. */
  runId: string;
  /** The run's row as the write left it, when the notification carries it and it checks out. */
  row(): { record: RunRecord; doc: string; varsSeq: number } | undefined;
}

const rowPrefix = "row:";
/** PostgreSQL refuses a payload of 8,000 bytes or more. */
const maxPayloadBytes = 7_999;

/** The payload that announces the row a write leaves (`doc` is `record` as JSON, `crc` its row's checksum). */
export function runNotice(record: RunRecord, varsSeq: number, doc: string, crc: number): string {
  const payload = `${rowPrefix}${record.version}:${varsSeq}:${crc}:${record.id}\n${doc}`;
  // Three bytes per UTF-16 unit at most: only a long payload is measured.
  return payload.length * 3 <= maxPayloadBytes || Buffer.byteLength(payload) <= maxPayloadBytes ? payload : record.id;
}

const none = () => undefined;

export function readRunNotice(payload: string): RunNotice {
  if (!payload) return { runId: "*", row: none };
  const lineEnd = payload.indexOf("\n");
  if (!payload.startsWith(rowPrefix) || lineEnd < 0) return { runId: payload, row: none };
  const [versionText, varsSeqText, crcText, ...idParts] = payload.slice(rowPrefix.length, lineEnd).split(":");
  const runId = idParts.join(":");
  return {
    runId,
    row() {
      const varsSeq = Number(varsSeqText);
      const doc = payload.slice(lineEnd + 1);
      let record: RunRecord;
      try {
        record = JSON.parse(doc) as RunRecord;
      } catch {
        return undefined;
      }
      if (typeof record !== "object" || record === null || record.id !== runId || record.version !== Number(versionText) || !Number.isInteger(varsSeq)) return undefined;
      return pgRunChecksum(runRowOf(record, varsSeq, doc)) === Number(crcText) ? { record, doc, varsSeq } : undefined;
    },
  };
}
