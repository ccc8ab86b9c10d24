import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { RunNotFoundError, SnapshotCorruptError, TetherError } from "../engine/errors.js";
import type {
  ApiTokenRecord,
  CommandRecord,
  EffectRecord,
  HaltRecord,
  JournalEntry,
  JournalInput,
  NewRun,
  RunFilter,
  RunRecord,
  RunUpdate,
  SnapshotWrite,
  Store,
  StoredState,
  UpdateResult,
} from "../engine/store.js";
import { newRunRecord, applyRunPatch, expectationsHold } from "../engine/run-record.js";

const schema = `
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  lease_until INTEGER,
  vars_seq INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL
);
-- By status alone: an index holding updated_at would be rewritten by every update of a run,
-- one more page written in every commit.
DROP INDEX IF EXISTS runs_status;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status);
CREATE INDEX IF NOT EXISTS runs_updated ON runs(updated_at);
CREATE TABLE IF NOT EXISTS journal (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  at INTEGER NOT NULL,
  call_seq INTEGER,
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
-- A rowid table on purpose: a WITHOUT ROWID row larger than ~1 KB (on 4 KB pages) spills into
-- an overflow page of its own, so each ~1 KB message would cost over 4 KB on disk.
CREATE TABLE IF NOT EXISTS messages (
  run_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS snapshots (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  step INTEGER NOT NULL,
  msg_count INTEGER NOT NULL,
  chain TEXT NOT NULL,
  checksum TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  at INTEGER NOT NULL,
  vars TEXT,
  vars_seq INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
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

/** Every statement the store runs, by name. */
const statementSql = {
  insertRun: "INSERT INTO runs (id, agent, status, created_at, updated_at, lease_until, vars_seq, doc) VALUES (?, ?, ?, ?, ?, NULL, 1, ?)",
  getRun: "SELECT doc, vars_seq FROM runs WHERE id = ?",
  saveRun: "UPDATE runs SET status = ?, updated_at = ?, lease_until = ?, vars_seq = ?, doc = ? WHERE id = ?",
  insertJournal: "INSERT INTO journal (run_id, seq, type, at, call_seq, data) VALUES (?, ?, ?, ?, ?, ?)",
  readJournal: "SELECT seq, type, at, call_seq, data FROM journal WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  insertMessage: "INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)",
  readMessages: "SELECT body FROM messages WHERE run_id = ? AND idx < ? ORDER BY idx",
  readMessage: "SELECT body FROM messages WHERE run_id = ? AND idx = ?",
  insertSnapshot: "INSERT INTO snapshots (run_id, seq, step, msg_count, chain, checksum, schema_version, at, vars, vars_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
  latestSnapshot: "SELECT * FROM snapshots WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
  snapshotAtStep: "SELECT * FROM snapshots WHERE run_id = ? AND step <= ? ORDER BY seq DESC LIMIT 1",
  snapshotVars: "SELECT vars FROM snapshots WHERE run_id = ? AND seq = ?",
  insertCommand: "INSERT INTO commands (id, run_id, type, actor, reason, payload, created_at, applied_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  applyCommand: "UPDATE commands SET applied_at = ?, outcome = ? WHERE id = ?",
  listCommands: "SELECT * FROM commands WHERE run_id = ? ORDER BY created_at, rowid",
  upsertEffect: `INSERT INTO effects (run_id, call_seq, tool, input, result, state, attempts, error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (run_id, call_seq) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at`,
  listEffects: "SELECT * FROM effects WHERE run_id = ? ORDER BY call_seq",
  listHalts: "SELECT * FROM halts ORDER BY at",
  setHalt: "INSERT INTO halts (scope, actor, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE SET actor = excluded.actor, reason = excluded.reason, at = excluded.at",
  clearHalt: "DELETE FROM halts WHERE scope = ?",
  claimable: `SELECT doc, vars_seq FROM runs WHERE status = 'queued'
       OR (status IN ('running', 'pausing', 'cancelling') AND (lease_until IS NULL OR lease_until < ?))
     ORDER BY updated_at LIMIT ?`,
  saveToken: "INSERT INTO tokens (id, name, role, hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
  tokenByHash: "SELECT * FROM tokens WHERE hash = ?",
  listTokens: "SELECT * FROM tokens ORDER BY created_at",
};

type StatementName = keyof typeof statementSql;

/**
 * Each statement is prepared when first used, so opening a store costs only what it runs: a
 * process that opens the file to resume one run prepares a handful, not all of them.
 */
function preparedOnFirstUse(db: Database.Database, sql: Record<StatementName, string>): Record<StatementName, Database.Statement> {
  const statements = {} as Record<StatementName, Database.Statement>;
  for (const name of Object.keys(sql) as StatementName[]) {
    Object.defineProperty(statements, name, {
      configurable: true,
      enumerable: true,
      get() {
        const statement = db.prepare(sql[name]);
        Object.defineProperty(statements, name, { value: statement, enumerable: true });
        return statement;
      },
    });
  }
  return statements;
}

export interface SqliteStoreOptions {
  /** Path of the database file; ":memory:" for a private in-memory database. */
  path: string;
  /** How long a writer waits for another process's lock before failing. */
  busyTimeoutMs?: number;
}

/** The embedded default store: one SQLite file in WAL mode, shared safely by several processes. */
export class SqliteStore implements Store {
  readonly kind = "sqlite";
  readonly path: string;
  private readonly db: Database.Database;
  private readonly statements: Record<StatementName, Database.Statement>;

  constructor(options: SqliteStoreOptions) {
    this.path = options.path;
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.db = new Database(options.path);
    this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    this.db.pragma("journal_mode = WAL");
    // WAL with synchronous=NORMAL survives any process crash (SIGKILL included); only an OS
    // crash or power loss can lose the last transactions.
    this.db.pragma("synchronous = NORMAL");
    this.db.exec(schema);
    this.statements = preparedOnFirstUse(this.db, statementSql);
  }

  /** The raw database, for tests that corrupt bytes on purpose and for the benchmark. */
  get database(): Database.Database {
    return this.db;
  }

  async createRun(run: NewRun, initial: SnapshotWrite, journal: JournalInput[]): Promise<RunRecord> {
    return this.createRunSync(run, initial, journal);
  }

  private createRunSync = (run: NewRun, initial: SnapshotWrite, journal: JournalInput[]): RunRecord =>
    this.db.transaction(() => {
      const record = newRunRecord(run);
      this.statements.insertRun.run(run.id, run.agent, run.status, run.createdAt, run.createdAt, JSON.stringify(record));
      const state = { record, varsSeq: 1 };
      this.writeSnapshot(state, initial, true);
      this.writeJournal(state.record, journal);
      this.saveRecord(state.record, state.varsSeq);
      return state.record;
    })();

  async getRun(runId: string): Promise<RunRecord | undefined> {
    const row = this.statements.getRun.get(runId) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as RunRecord) : undefined;
  }

  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.status?.length) {
      where.push(`status IN (${filter.status.map(() => "?").join(", ")})`);
      params.push(...filter.status);
    }
    if (filter.agent) {
      where.push("agent = ?");
      params.push(filter.agent);
    }
    if (filter.updatedAfter !== undefined) {
      where.push("updated_at > ?");
      params.push(filter.updatedAfter);
    }
    const sql = `SELECT doc FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at DESC, id LIMIT ?`;
    params.push(filter.limit ?? 100);
    return (this.db.prepare(sql).all(...params) as { doc: string }[]).map((row) => JSON.parse(row.doc) as RunRecord);
  }

  async update(update: RunUpdate): Promise<UpdateResult> {
    return this.updateSync(update);
  }

  private updateSync = this.wrapTransaction((update: RunUpdate): UpdateResult => {
    const row = this.statements.getRun.get(update.runId) as { doc: string; vars_seq: number } | undefined;
    if (!row) throw new RunNotFoundError(update.runId);
    const current = JSON.parse(row.doc) as RunRecord;
    if (!expectationsHold(current, update.expect)) return { ok: false, run: current };
    const record = applyRunPatch(current, update);
    const state = { record, varsSeq: row.vars_seq };
    if (update.snapshot) this.writeSnapshot(state, update.snapshot, false);
    const journal = update.journal ? this.writeJournal(state.record, update.journal) : [];
    for (const effect of update.effects ?? []) {
      this.statements.upsertEffect.run(
        update.runId,
        effect.callSeq,
        effect.tool,
        JSON.stringify(effect.input),
        JSON.stringify(effect.result),
        effect.state,
        effect.attempts,
        effect.error,
        effect.updatedAt,
      );
    }
    if (update.insertCommand) this.insertCommandSync(update.insertCommand);
    for (const applied of update.appliedCommands ?? []) this.statements.applyCommand.run(applied.appliedAt, applied.outcome, applied.id);
    this.saveRecord(state.record, state.varsSeq);
    return { ok: true, run: state.record, journal };
  });

  private wrapTransaction<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
    // Built once, on first use (the database is opened after the field initialisers run).
    let transaction: Database.Transaction<(...args: A) => R> | undefined;
    return (...args: A) => {
      try {
        transaction ??= this.db.transaction(fn);
        // IMMEDIATE takes the write lock up front, so two processes never deadlock on upgrade.
        return transaction.immediate(...args);
      } catch (error) {
        if (TetherError.isInstance(error)) throw error;
        throw new TetherError("store_error", `sqlite store at ${this.path}: ${(error as Error).message}`, undefined, { cause: error });
      }
    };
  }

  private saveRecord(record: RunRecord, varsSeq: number): void {
    this.statements.saveRun.run(record.status, record.updatedAt, record.lease?.until ?? null, varsSeq, JSON.stringify(record), record.id);
  }

  private writeJournal(record: RunRecord, entries: JournalInput[]): JournalEntry[] {
    const written: JournalEntry[] = [];
    for (const entry of entries) {
      const seq = ++record.journalSeq;
      this.statements.insertJournal.run(record.id, seq, entry.type, entry.at, entry.callSeq ?? null, JSON.stringify(entry.data));
      written.push({ ...entry, runId: record.id, seq });
    }
    return written;
  }

  private writeSnapshot(state: { record: RunRecord; varsSeq: number }, snapshot: SnapshotWrite, first: boolean): void {
    const { record } = state;
    const { head } = snapshot;
    const firstIndex = head.messageCount - snapshot.appendMessages.length;
    for (let i = 0; i < snapshot.appendMessages.length; i++) {
      this.statements.insertMessage.run(record.id, firstIndex + i, snapshot.appendMessages[i]);
    }
    const seq = first ? 1 : record.snapshotSeq + 1;
    if (snapshot.varsJson !== undefined) state.varsSeq = seq;
    this.statements.insertSnapshot.run(
      record.id,
      seq,
      head.step,
      head.messageCount,
      head.chain,
      head.checksum,
      head.schemaVersion,
      head.at,
      snapshot.varsJson ?? null,
      state.varsSeq,
    );
    record.snapshotSeq = seq;
    record.snapshotAt = head.at;
  }

  async readJournal(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<JournalEntry[]> {
    const rows = this.statements.readJournal.all(runId, options.afterSeq ?? 0, options.limit ?? 1000) as {
      seq: number;
      type: JournalEntry["type"];
      at: number;
      call_seq: number | null;
      data: string;
    }[];
    return rows.map((row) => ({
      runId,
      seq: row.seq,
      type: row.type,
      at: row.at,
      ...(row.call_seq === null ? {} : { callSeq: row.call_seq }),
      data: JSON.parse(row.data),
    }));
  }

  async loadState(runId: string, options: { atStep?: number } = {}): Promise<StoredState> {
    const row = (
      options.atStep === undefined ? this.statements.latestSnapshot.get(runId) : this.statements.snapshotAtStep.get(runId, options.atStep)
    ) as SnapshotRow | undefined;
    if (!row) {
      if (!(await this.getRun(runId))) throw new RunNotFoundError(runId);
      throw new SnapshotCorruptError(runId, options.atStep === undefined ? "no snapshot row" : `no snapshot at or before step ${options.atStep}`);
    }
    const varsRow = (row.vars_seq === row.seq ? row : this.statements.snapshotVars.get(runId, row.vars_seq)) as { vars: string | null } | undefined;
    if (!varsRow || varsRow.vars === null) throw new SnapshotCorruptError(runId, `vars of snapshot ${row.vars_seq} are missing`);
    const messages = (this.statements.readMessages.raw().all(runId, row.msg_count) as [string][]).map((r) => r[0]);
    return {
      head: {
        seq: row.seq,
        step: row.step,
        messageCount: row.msg_count,
        chain: row.chain,
        checksum: row.checksum,
        schemaVersion: row.schema_version,
        at: row.at,
        varsSeq: row.vars_seq,
      },
      varsJson: varsRow.vars,
      messages,
    };
  }

  async readMessages(runId: string, indexes: readonly number[]): Promise<Map<number, string>> {
    const found = new Map<number, string>();
    for (const index of indexes) {
      const row = this.statements.readMessage.get(runId, index) as { body: string } | undefined;
      if (row) found.set(index, row.body);
    }
    return found;
  }

  async insertCommand(command: CommandRecord): Promise<void> {
    this.insertCommandSync(command);
  }

  private insertCommandSync(command: CommandRecord): void {
    this.statements.insertCommand.run(
      command.id,
      command.runId,
      command.type,
      command.actor,
      command.reason,
      JSON.stringify(command.payload),
      command.createdAt,
      command.appliedAt,
      command.outcome,
    );
  }

  async listCommands(runId: string): Promise<CommandRecord[]> {
    return (this.statements.listCommands.all(runId) as CommandRow[]).map((row) => ({
      id: row.id,
      runId: row.run_id,
      type: row.type as CommandRecord["type"],
      actor: row.actor,
      reason: row.reason,
      payload: JSON.parse(row.payload),
      createdAt: row.created_at,
      appliedAt: row.applied_at,
      outcome: row.outcome,
    }));
  }

  async listEffects(runId: string): Promise<EffectRecord[]> {
    return (this.statements.listEffects.all(runId) as EffectRow[]).map((row) => ({
      runId,
      callSeq: row.call_seq,
      tool: row.tool,
      input: JSON.parse(row.input),
      result: JSON.parse(row.result),
      state: row.state as EffectRecord["state"],
      attempts: row.attempts,
      error: row.error,
      updatedAt: row.updated_at,
    }));
  }

  async listHalts(): Promise<HaltRecord[]> {
    return this.statements.listHalts.all() as HaltRecord[];
  }

  async setHalt(halt: HaltRecord): Promise<void> {
    this.statements.setHalt.run(halt.scope, halt.actor, halt.reason, halt.at);
  }

  async clearHalt(scope: string): Promise<boolean> {
    return this.statements.clearHalt.run(scope).changes > 0;
  }

  async findClaimable(now: number, limit: number): Promise<RunRecord[]> {
    return (this.statements.claimable.all(now, limit) as { doc: string }[]).map((row) => JSON.parse(row.doc) as RunRecord);
  }

  async saveToken(token: ApiTokenRecord): Promise<void> {
    this.statements.saveToken.run(token.id, token.name, token.role, token.hash, token.createdAt, token.revokedAt);
  }

  async findTokenByHash(hash: string): Promise<ApiTokenRecord | undefined> {
    const row = this.statements.tokenByHash.get(hash) as TokenRow | undefined;
    return row ? tokenFromRow(row) : undefined;
  }

  async listTokens(): Promise<ApiTokenRecord[]> {
    return (this.statements.listTokens.all() as TokenRow[]).map(tokenFromRow);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

interface SnapshotRow {
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

interface CommandRow {
  id: string;
  run_id: string | null;
  type: string;
  actor: string;
  reason: string | null;
  payload: string;
  created_at: number;
  applied_at: number | null;
  outcome: string | null;
}

interface EffectRow {
  call_seq: number;
  tool: string;
  input: string;
  result: string;
  state: string;
  attempts: number;
  error: string | null;
  updated_at: number;
}

interface TokenRow {
  id: string;
  name: string;
  role: ApiTokenRecord["role"];
  hash: string;
  created_at: number;
  revoked_at: number | null;
}

function tokenFromRow(row: TokenRow): ApiTokenRecord {
  return { id: row.id, name: row.name, role: row.role, hash: row.hash, createdAt: row.created_at, revokedAt: row.revoked_at };
}
