import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { restoreState } from "../engine/snapshot.js";
import type { StoredState } from "../engine/store.js";
import {
  checksummedColumns,
  journalTypeOf,
  messagesInRows,
  perRun,
  rowIntact,
  runChecksummedColumns,
  snapshotHeadOf,
  sqliteRunIntact,
  storeLayout,
  type ChecksummedRow,
  type RunRow,
  type SnapshotRow,
} from "./sqlite-schema.js";
import type { VerifyReport } from "./verify-report.js";

export type { StoreDamage, VerifyReport } from "./verify-report.js";

type StoredRow = ChecksummedRow & { crc: number | null };

/**
 * Reads every row of a SQLite store and reports what is damaged, changing nothing: SQLite's own
 * `integrity_check` (pages, indexes), then each run's row (its checksum and record), each journal row's checksum, JSON and
 * place (entries numbered 1..n without a gap, the run's own count, messages beside a snapshot),
 * the latest snapshot's checksum, and the rows of commands, effects and tokens. A file SQLite
 * cannot open at all is one damage of the "file".
 */
export function verifySqliteStore(path: string): VerifyReport {
  const report: VerifyReport = { path, layout: 0, runs: 0, rows: 0, damage: [], damagedRuns: [] };
  if (!existsSync(path)) {
    report.damage.push({ row: "file", problem: "no such file" });
    return report;
  }
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    report.layout = Number(db.pragma("user_version", { simple: true }));
  } catch (error) {
    report.damage.push({ row: "file", problem: `SQLite cannot open it: ${(error as Error).message}` });
    return report;
  }
  try {
    if (report.layout !== storeLayout) {
      report.damage.push({ row: "file", problem: `layout ${report.layout}, this Tether reads layout ${storeLayout} (open it with \`tether ls --db\` once to migrate, then verify)` });
      return report;
    }
    try {
      const lines = db.pragma("integrity_check", { simple: false }) as { integrity_check: string }[];
      for (const line of lines) if (line.integrity_check !== "ok") report.damage.push({ row: "file", problem: `integrity_check: ${line.integrity_check}` });
    } catch (error) {
      report.damage.push({ row: "file", problem: `integrity_check failed: ${(error as Error).message}` });
    }
    verifyRows(db, report);
  } catch (error) {
    report.damage.push({ row: "file", problem: `reading stopped: ${(error as Error).message}` });
  } finally {
    db.close();
  }
  report.damagedRuns = [...new Set(report.damage.flatMap((d) => (d.runId ? [d.runId] : [])))];
  return report;
}

function verifyRows(db: Database.Database, report: VerifyReport): void {
  const runs = db.prepare(`SELECT rk, ${runChecksummedColumns} FROM runs WHERE status != 'pruned' ORDER BY rk`).all() as (RunRow & { rk: number; crc: number | null })[];
  const rowsOf = db.prepare(`SELECT ${checksummedColumns} FROM journal WHERE k >= ? AND k < ? ORDER BY k`);
  const damage = (runId: string | undefined, row: string, problem: string) => report.damage.push({ ...(runId ? { runId } : {}), row, problem });
  const known = new Set<number>();
  const snapshotsToCheck: string[] = [];
  for (const run of runs) {
    report.runs += 1;
    known.add(run.rk);
    let doc: { id?: string; status?: string; journalSeq?: number; snapshotSeq?: number } = {};
    let runDamaged = false;
    if (!sqliteRunIntact(run)) {
      // Its record is not what was written: its counts are not compared with the journal.
      runDamaged = true;
      damage(run.id, "run row", run.crc === null ? "no checksum" : "fails its checksum");
    } else {
      try {
        doc = JSON.parse(run.doc) as typeof doc;
        if (doc.id !== run.id || doc.status !== run.status) damage(run.id, "run row", `the record says ${doc.id} ${doc.status}, the row ${run.id} ${run.status}`);
      } catch (error) {
        damage(run.id, "run row", `unreadable record: ${(error as Error).message}`);
      }
    }
    const base = run.rk * perRun;
    let expectedSeq = 1;
    let lastSnapshot = 0;
    const rows = rowsOf.all(base, base + perRun) as StoredRow[];
    for (const [i, row] of rows.entries()) {
      report.rows += 1;
      const n = row.k - base;
      const where = row.type > 0 ? `journal entry ${n / 2}` : `messages before journal entry ${(n + 1) / 2}`;
      const fail = (problem: string) => {
        runDamaged = true;
        damage(run.id, where, problem);
      };
      if (!rowIntact(row)) {
        fail(row.crc === null ? "no checksum" : "fails its checksum");
        // Counted where its key puts it, so the entries after it are not reported missing too.
        if (row.type > 0 && n % 2 === 0) expectedSeq = n / 2 + 1;
        if (row.snap_seq !== null && row.snap_seq !== undefined) lastSnapshot = row.snap_seq;
        continue;
      }
      if (row.type > 0) {
        if (n % 2 !== 0) fail(`an entry at an odd row ${n}`);
        else if (n / 2 !== expectedSeq) fail(`entry ${n / 2} follows entry ${expectedSeq - 1}: entries ${expectedSeq}..${n / 2 - 1} are missing`);
        expectedSeq = n / 2 + 1;
        try {
          journalTypeOf(row.type);
          JSON.parse(row.data);
        } catch (error) {
          fail((error as Error).message);
        }
        if (row.snap_seq !== null && row.snap_seq !== undefined) lastSnapshot = row.snap_seq;
      } else {
        const next = rows[i + 1];
        if (n % 2 !== 1 || next?.k !== row.k + 1 || next.snap_seq === null) fail("a row of messages without the snapshot entry after it");
        try {
          messagesInRows([row.data]);
        } catch (error) {
          fail((error as Error).message);
        }
      }
    }
    if (doc.journalSeq !== undefined && expectedSeq - 1 !== doc.journalSeq) {
      runDamaged = true;
      damage(run.id, "journal", `the run has ${doc.journalSeq} journal entries, the journal ${expectedSeq - 1}`);
    }
    if (doc.snapshotSeq !== undefined && lastSnapshot !== doc.snapshotSeq) {
      runDamaged = true;
      damage(run.id, "journal", `the run's latest snapshot is ${doc.snapshotSeq}, the journal's ${lastSnapshot}`);
    }
    if (!runDamaged) snapshotsToCheck.push(run.id);
  }
  // Journal rows of no run (a run row lost while its journal survived).
  const orphans = db.prepare(`SELECT DISTINCT k / ${perRun} AS rk FROM journal`).pluck().all() as number[];
  for (const rk of orphans) if (!known.has(rk)) damage(undefined, `journal rows of run key ${rk}`, "no run row owns them");

  const jsonColumns: [string, string, string[]][] = [
    ["commands", "id", ["payload"]],
    ["effects", "run_id || ':' || call_seq", ["input", "result"]],
  ];
  for (const [table, key, columns] of jsonColumns) {
    for (const row of db.prepare(`SELECT ${key} AS key, run_id AS runId, ${columns.join(", ")} FROM ${table}`).all() as Record<string, string>[]) {
      for (const column of columns) {
        try {
          JSON.parse(row[column]);
        } catch (error) {
          damage(row.runId ?? undefined, `${table.slice(0, -1)} ${row.key}`, `unreadable ${column}: ${(error as Error).message}`);
        }
      }
    }
  }
  for (const row of db.prepare("SELECT id, role, hash FROM tokens").all() as { id: string; role: string; hash: string }[]) {
    if (!["viewer", "operator", "admin"].includes(row.role) || !/^[0-9a-f]{64}$/.test(row.hash)) damage(undefined, `token ${row.id}`, "unreadable role or hash");
  }
  verifySnapshots(db, snapshotsToCheck, report);
}

/** The latest snapshot of each run whose rows are intact, checked as a resume would (vars included). */
function verifySnapshots(db: Database.Database, runIds: readonly string[], report: VerifyReport): void {
  const keyOf = db.prepare("SELECT rk FROM runs WHERE id = ?").pluck();
  const latest = db.prepare(
    "SELECT k, at, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_key FROM journal WHERE k > ? AND k < ? AND snap_seq IS NOT NULL ORDER BY k DESC LIMIT 1",
  );
  const varsAt = db.prepare("SELECT vars, snap_seq FROM journal WHERE k = ?");
  const messagesBefore = db.prepare("SELECT data FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k").pluck();
  for (const runId of runIds) {
    const base = (keyOf.get(runId) as number) * perRun;
    const row = latest.get(base, base + perRun) as SnapshotRow | undefined;
    if (!row) {
      report.damage.push({ runId, row: "latest snapshot", problem: "no snapshot" });
      continue;
    }
    const vars = (row.vars_key === null ? row : varsAt.get(row.vars_key)) as { vars: string | null; snap_seq: number } | undefined;
    const stored: StoredState = {
      head: snapshotHeadOf(row, base, vars?.snap_seq ?? 0),
      varsJson: vars?.vars ?? "",
      messages: [],
    };
    try {
      if (vars?.vars === null || vars?.vars === undefined) throw new Error(`the vars of snapshot ${row.snap_seq} are missing`);
      stored.messages = messagesInRows(messagesBefore.all(base, row.k) as string[]);
      restoreState(runId, stored);
    } catch (error) {
      report.damage.push({ runId, row: "latest snapshot", problem: (error as Error).message });
    }
  }
}

