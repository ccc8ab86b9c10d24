import pg from "pg";
import { TetherError } from "../engine/errors.js";
import { restoreState } from "../engine/snapshot.js";
import { journalTypeCode } from "./sqlite-schema.js";
import { migrations, pgChecksummedColumns, pgMessageIntact, pgRowIntact, pgRunColumns, pgRunIntact, pgTypes, quoteIdentifier, type PgChecksummedRow, type PgRunRow } from "./pg-schema.js";
import type { StoreDamage, VerifyReport } from "./verify-report.js";

/** Runs read at once: their journals and messages are read with them, so a page stays a few megabytes. */
const runsPerPage = 50;
/** Rows of commands and effects read at once. */
const rowsPerPage = 1000;

type RunRow = PgRunRow & { crc: number | null };
type JournalRow = PgChecksummedRow & { run_id: string; crc: number | null };
type MessageRow = { run_id: string; idx: number; body: string; crc: number | null };

/**
 * Reads every row of a PostgreSQL schema and reports what is damaged, as `verifySqliteStore`
 * does for a file, changing nothing: one READ ONLY transaction (REPEATABLE READ, so every page
 * sees the same moment while workers write on), the runs a page at a time by id with their
 * journal and messages, then the orphaned rows and the rows of commands, effects and tokens.
 * Each run row's checksum and record, each journal and message row's checksum, JSON and place
 * (entries numbered 1..n and messages 0..n−1 without a gap, the run's own counts), and the latest
 * snapshot of each intact run restored as a resume would. PostgreSQL checks its own pages; a
 * database it cannot reach, or a schema with no Tether tables, is `store_error`, not damage.
 */
export async function verifyPostgresStore(options: { connectionString: string; schema: string; path: string }): Promise<VerifyReport> {
  const s = quoteIdentifier(options.schema);
  const report: VerifyReport = { path: options.path, layout: 0, runs: 0, rows: 0, damage: [], damagedRuns: [] };
  const client = new pg.Client({ connectionString: options.connectionString, types: pgTypes });
  try {
    await client.connect();
  } catch (error) {
    throw new TetherError("store_error", `cannot connect to PostgreSQL at ${options.path}: ${(error as Error).message}`, undefined, { cause: error });
  }
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const found = await client.query<{ found: boolean }>("SELECT to_regclass($1) IS NOT NULL AS found", [`${s}.migrations`]);
    if (!found.rows[0].found) throw new TetherError("store_error", `no Tether store at ${options.path}: the schema has no migrations table`);
    report.layout = Number((await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.migrations`)).rows[0].v ?? 0);
    const known = migrations[migrations.length - 1].version;
    if (report.layout !== known) {
      report.damage.push({ row: "schema", problem: `migration ${report.layout}, this Tether reads migration ${known} (open it with \`tether ls --database-url\` once to migrate, then verify)` });
      return report;
    }
    const check = new Checker(client, s, report);
    await check.runs();
    await check.orphans();
    await check.otherTables();
  } catch (error) {
    if (TetherError.isInstance(error)) throw error;
    report.damage.push({ row: "schema", problem: `reading stopped: ${(error as Error).message}` });
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
    await client.end().catch(() => undefined);
    report.damagedRuns = [...new Set(report.damage.flatMap((d) => (d.runId ? [d.runId] : [])))];
  }
  return report;
}

class Checker {
  constructor(
    private readonly client: pg.Client,
    private readonly s: string,
    private readonly report: VerifyReport,
  ) {}

  private damage(runId: string | undefined, row: string, problem: string): void {
    this.report.damage.push({ ...(runId ? { runId } : {}), row, problem } satisfies StoreDamage);
  }

  async runs(): Promise<void> {
    const { client, s } = this;
    for (let after = ""; ; ) {
      const runs = (await client.query<RunRow>(`SELECT ${pgRunColumns} FROM ${s}.runs WHERE id > $1 ORDER BY id LIMIT $2`, [after, runsPerPage])).rows;
      if (runs.length === 0) return;
      after = runs[runs.length - 1].id;
      const ids = runs.map((run) => run.id);
      // Vars are read only for the snapshots restored below: they can be the biggest column.
      const journal = groupBy(
        (await client.query<JournalRow>(`SELECT run_id, ${pgChecksummedColumns} FROM ${s}.journal WHERE run_id = ANY($1::text[]) ORDER BY run_id, seq`, [ids])).rows,
      );
      const messages = groupBy((await client.query<MessageRow>(`SELECT run_id, idx, body, crc FROM ${s}.messages WHERE run_id = ANY($1::text[]) ORDER BY run_id, idx`, [ids])).rows);
      for (const run of runs) {
        this.report.runs += 1;
        const intact = this.run(run, journal.get(run.id) ?? [], messages.get(run.id) ?? []);
        if (intact) await this.latestSnapshot(run.id, journal.get(run.id) ?? [], messages.get(run.id) ?? []);
      }
    }
  }

  /** One run's rows; true when every one is intact. */
  private run(run: RunRow, journal: JournalRow[], messages: MessageRow[]): boolean {
    let damaged = false;
    const fail = (row: string, problem: string) => {
      damaged = true;
      this.damage(run.id, row, problem);
    };
    let doc: { id?: string; status?: string; journalSeq?: number; snapshotSeq?: number } = {};
    if (!pgRunIntact(run)) {
      // Its record is not what was written: its counts are not compared with the journal.
      fail("run row", run.crc === null ? "no checksum" : "fails its checksum");
    } else {
      try {
        doc = JSON.parse(run.doc) as typeof doc;
        if (doc.id !== run.id || doc.status !== run.status) fail("run row", `the record says ${doc.id} ${doc.status}, the row ${run.id} ${run.status}`);
      } catch (error) {
        fail("run row", `unreadable record: ${(error as Error).message}`);
      }
    }
    let expectedSeq = 1;
    let lastSnapshot = 0;
    for (const row of journal) {
      this.report.rows += 1;
      const where = `journal entry ${row.seq}`;
      if (row.seq !== expectedSeq) fail(where, `entry ${row.seq} follows entry ${expectedSeq - 1}: entries ${expectedSeq}..${row.seq - 1} are missing`);
      expectedSeq = row.seq + 1;
      if (row.snap_seq !== null && row.snap_seq !== undefined) lastSnapshot = row.snap_seq;
      if (!pgRowIntact(run.id, row)) {
        fail(where, row.crc === null ? "no checksum" : "fails its checksum");
        continue;
      }
      if (!(row.type in journalTypeCode)) fail(where, `unknown journal entry type ${row.type}`);
      try {
        JSON.parse(row.data);
      } catch (error) {
        fail(where, (error as Error).message);
      }
    }
    let expectedIdx = 0;
    for (const row of messages) {
      this.report.rows += 1;
      const where = `message ${row.idx}`;
      if (row.idx !== expectedIdx) fail(where, `message ${row.idx} follows message ${expectedIdx - 1}: messages ${expectedIdx}..${row.idx - 1} are missing`);
      expectedIdx = row.idx + 1;
      if (!pgMessageIntact(run.id, row)) fail(where, row.crc === null ? "no checksum" : "fails its checksum");
    }
    if (doc.journalSeq !== undefined && expectedSeq - 1 !== doc.journalSeq) fail("journal", `the run has ${doc.journalSeq} journal entries, the journal ${expectedSeq - 1}`);
    if (doc.snapshotSeq !== undefined && lastSnapshot !== doc.snapshotSeq) fail("journal", `the run's latest snapshot is ${doc.snapshotSeq}, the journal's ${lastSnapshot}`);
    return !damaged;
  }

  /** The latest snapshot of a run whose rows are intact, checked as a resume would (vars included). */
  private async latestSnapshot(runId: string, journal: JournalRow[], messages: MessageRow[]): Promise<void> {
    const head = journal.findLast((row) => row.snap_seq !== null && row.snap_seq !== undefined);
    if (!head) {
      this.damage(runId, "latest snapshot", "no snapshot");
      return;
    }
    const varsSeq = head.vars_seq ?? head.seq;
    const vars = (await this.client.query<{ vars: string | null; snap_seq: number | null }>(`SELECT vars, snap_seq FROM ${this.s}.journal WHERE run_id = $1 AND seq = $2`, [runId, varsSeq])).rows[0];
    try {
      if (vars?.vars === null || vars?.vars === undefined || vars.snap_seq === null) throw new Error(`the vars of snapshot ${head.snap_seq} are missing`);
      const count = head.msg_count ?? 0;
      if (messages.length < count) throw new Error(`snapshot ${head.snap_seq} holds ${count} messages but ${messages.length} are stored`);
      restoreState(runId, {
        head: {
          seq: head.snap_seq!,
          step: head.snap_step!,
          messageCount: count,
          chain: head.chain!,
          checksum: head.checksum!,
          schemaVersion: head.schema_version!,
          at: head.snap_at ?? head.at,
          varsSeq: vars.snap_seq,
          entrySeq: head.seq,
        },
        varsJson: vars.vars,
        messages: messages.slice(0, count).map((m) => m.body),
      });
    } catch (error) {
      this.damage(runId, "latest snapshot", (error as Error).message);
    }
  }

  /** Journal and message rows of no run (a run row lost while its rows survived). */
  async orphans(): Promise<void> {
    for (const table of ["journal", "messages"]) {
      const { rows } = await this.client.query<{ run_id: string; n: number }>(
        `SELECT t.run_id, count(*)::int AS n FROM ${this.s}.${table} t WHERE NOT EXISTS (SELECT 1 FROM ${this.s}.runs r WHERE r.id = t.run_id) GROUP BY t.run_id ORDER BY t.run_id`,
      );
      for (const row of rows) this.damage(undefined, `${table} rows of run ${row.run_id}`, `no run row owns them (${row.n})`);
    }
  }

  /** Commands' payloads and effects' inputs and results as JSON, tokens' role and hash; a page at a time. */
  async otherTables(): Promise<void> {
    const { client, s } = this;
    for (let after = 0; ; ) {
      const { rows } = await client.query<{ n: number; id: string; run_id: string | null; payload: string }>(`SELECT n, id, run_id, payload FROM ${s}.commands WHERE n > $1 ORDER BY n LIMIT $2`, [after, rowsPerPage]);
      if (rows.length === 0) break;
      after = rows[rows.length - 1].n;
      for (const row of rows) this.json(row.run_id ?? undefined, `command ${row.id}`, { payload: row.payload });
    }
    for (let after = { run_id: "", call_seq: -1 }; ; ) {
      const { rows } = await client.query<{ run_id: string; call_seq: number; input: string; result: string }>(
        `SELECT run_id, call_seq, input, result FROM ${s}.effects WHERE (run_id, call_seq) > ($1::text, $2::int) ORDER BY run_id, call_seq LIMIT $3`,
        [after.run_id, after.call_seq, rowsPerPage],
      );
      if (rows.length === 0) break;
      after = rows[rows.length - 1];
      for (const row of rows) this.json(row.run_id, `effect ${row.run_id}:${row.call_seq}`, { input: row.input, result: row.result });
    }
    for (const row of (await client.query<{ id: string; role: string; hash: string }>(`SELECT id, role, hash FROM ${s}.tokens`)).rows) {
      if (!["viewer", "operator", "admin"].includes(row.role) || !/^[0-9a-f]{64}$/.test(row.hash)) this.damage(undefined, `token ${row.id}`, "unreadable role or hash");
    }
  }

  private json(runId: string | undefined, where: string, columns: Record<string, string>): void {
    for (const [column, text] of Object.entries(columns)) {
      try {
        JSON.parse(text);
      } catch (error) {
        this.damage(runId, where, `unreadable ${column}: ${(error as Error).message}`);
      }
    }
  }
}

function groupBy<R extends { run_id: string }>(rows: R[]): Map<string, R[]> {
  const byRun = new Map<string, R[]>();
  for (const row of rows) {
    const list = byRun.get(row.run_id);
    if (list) list.push(row);
    else byRun.set(row.run_id, [row]);
  }
  return byRun;
}
