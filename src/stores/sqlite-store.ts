import Database from "better-sqlite3";
import { mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { HaltedError, RunNotFoundError, SnapshotCorruptError, StoreCorruptError, TetherError } from "../engine/errors.js";
import { emptyChain, extendChain } from "../engine/snapshot.js";
import type {
  ApiTokenRecord,
  CommandRecord,
  DamagedRun,
  EffectRecord,
  HaltRecord,
  JournalEntry,
  JournalInput,
  NewRun,
  PruneOptions,
  PruneReport,
  RunFilter,
  RunRef,
  RunStorage,
  RunRecord,
  RunUpdate,
  SnapshotHead,
  SnapshotWrite,
  Store,
  StoredState,
  UpdateResult,
} from "../engine/store.js";
import { intactRecords } from "./damaged-runs.js";
import { newRunRecord, applyRunPatch, expectationsHold, inJournalOrder } from "../engine/run-record.js";
import { WalCheckpointer } from "./sqlite-checkpointer.js";
import { controlled, madeElsewhere, stopping } from "./control-writes.js";
import { GroupCommit, type Outcome } from "./group-commit.js";
import { commandFromRow, effectFromRow, tokenFromRow, type CommandRow, type EffectRow, type TokenRow } from "./store-rows.js";
import { ensureLayout } from "./sqlite-migration.js";
import {
  checksummedColumns,
  entryKey,
  journalTypeCode,
  journalTypeOf,
  messagesInRows,
  messagesRowData,
  messagesRowType,
  perRun,
  rowChecksum,
  rowIntact,
  rowKey,
  runChecksummedColumns,
  snapshotHeadOf,
  sqliteRunChecksum,
  sqliteRunIntact,
  updatedBucket,
  type ChecksummedRow,
  type RunRow,
  type SnapshotRow,
} from "./sqlite-schema.js";

const snapshotColumns = `${checksummedColumns}, vars`;

/** Every statement the store runs, by name. Keys: see `rowKey` and `entryKey` in sqlite-schema.ts. */
const statementSql = {
  // Every write of a run row writes its checksum (`sqliteRunChecksum`), every read checks it.
  insertRun: "INSERT INTO runs (id, agent, status, created_at, updated_bucket, lease_until, vars_key, doc, crc) VALUES (?, ?, ?, ?, ?, NULL, 0, ?, ?)",
  // A pruned run may leave a tombstone (see `prune`): it is no run.
  runKey: "SELECT rk FROM runs WHERE id = ? AND status != 'pruned'",
  getRun: `SELECT rk, ${runChecksummedColumns} FROM runs WHERE id = ? AND status != 'pruned'`,
  getRunByKey: `SELECT ${runChecksummedColumns} FROM runs WHERE rk = ?`,
  // The indexed columns are written only when they change: see sqlite-schema.ts.
  saveRun: "UPDATE runs SET lease_until = ?, vars_key = ?, doc = ?, crc = ? WHERE rk = ?",
  saveRunIndexed: "UPDATE runs SET status = ?, updated_bucket = ?, lease_until = ?, vars_key = ?, doc = ?, crc = ? WHERE rk = ?",
  insertJournal: "INSERT INTO journal (k, type, at, call_seq, data, crc) VALUES (?, ?, ?, ?, ?, ?)",
  insertJournalWithSnapshot: `INSERT INTO journal (k, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_key, crc)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  readJournal: `SELECT ${checksummedColumns} FROM journal WHERE k > ? AND k < ? AND type > 0 ORDER BY k LIMIT ?`,
  insertMessages: "INSERT INTO journal (k, type, at, data, crc) VALUES (?, ?, ?, ?, ?)",
  readMessages: "SELECT k, type, at, call_seq, data, crc FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k",
  readMessageData: "SELECT data FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k",
  messagesRow: "SELECT k, type, at, call_seq, data, crc FROM journal WHERE k = ? AND type <= 0",
  messageCountAt: "SELECT k, msg_count FROM journal WHERE k > ? AND k <= ? AND snap_seq IS NOT NULL ORDER BY k DESC LIMIT 1",
  latestSnapshot: `SELECT ${snapshotColumns} FROM journal WHERE k > ? AND k < ? AND snap_seq IS NOT NULL ORDER BY k DESC LIMIT 1`,
  snapshotAtStep: `SELECT ${snapshotColumns} FROM journal WHERE k > ? AND k < ? AND snap_seq IS NOT NULL AND snap_step <= ? ORDER BY k DESC LIMIT 1`,
  snapshotVars: "SELECT vars, snap_seq FROM journal WHERE k = ?",
  insertCommand: "INSERT INTO commands (id, run_id, type, actor, reason, payload, created_at, applied_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  settleCommands: "UPDATE commands SET applied_at = ?, outcome = ? WHERE run_id = ? AND type = ? AND applied_at IS NULL",
  listCommands: "SELECT * FROM commands WHERE run_id = ? ORDER BY created_at, rowid",
  upsertEffect: `INSERT INTO effects (run_id, call_seq, tool, input, result, state, attempts, error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (run_id, call_seq) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at`,
  listEffects: "SELECT * FROM effects WHERE run_id = ? ORDER BY call_seq",
  listHalts: "SELECT * FROM halts ORDER BY at",
  haltOver: "SELECT scope FROM halts WHERE scope IN ('*', ?) ORDER BY at LIMIT 1",
  setHalt: "INSERT INTO halts (scope, actor, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE SET actor = excluded.actor, reason = excluded.reason, at = excluded.at",
  clearHalt: "DELETE FROM halts WHERE scope = ?",
  dataVersion: "PRAGMA data_version",
  claimable: `SELECT ${runChecksummedColumns} FROM runs WHERE status = 'queued'
       OR (status IN ('running', 'pausing', 'cancelling') AND (lease_until IS NULL OR lease_until < ?))
     ORDER BY updated_bucket, rk LIMIT ?`,
  saveToken: "INSERT INTO tokens (id, name, role, hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
  tokenByHash: "SELECT * FROM tokens WHERE hash = ?",
  listTokens: "SELECT * FROM tokens ORDER BY created_at",
  revokeToken: "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
  tokenById: "SELECT * FROM tokens WHERE id = ?",
  // Journal entries and rows of messages (a row may hold several bodies: counted from the snapshot heads).
  journalSize: `SELECT SUM(type > 0) AS entries, SUM(LENGTH(data) + COALESCE(LENGTH(vars), 0) + COALESCE(LENGTH(checksum), 0)) AS bytes,
       (SELECT msg_count FROM journal WHERE k >= ? AND k < ? AND snap_seq IS NOT NULL ORDER BY k DESC LIMIT 1) AS messages
     FROM journal WHERE k >= ? AND k < ?`,
  effectsSize: "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(input) + LENGTH(result) + COALESCE(LENGTH(error), 0)), 0) AS bytes FROM effects WHERE run_id = ?",
  commandsSize: "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(payload) + COALESCE(LENGTH(reason), 0)), 0) AS bytes FROM commands WHERE run_id = ?",
  prunable: `SELECT rk, ${runChecksummedColumns}, LENGTH(doc) AS doc_bytes FROM runs WHERE status IN ('completed', 'failed', 'cancelled') AND updated_bucket <= ?
       AND json_extract(doc, '$.updatedAt') < ? AND rk > ? ORDER BY rk LIMIT ?`,
  maxRunKey: "SELECT MAX(rk) FROM runs",
  // SQLite hands a new run the highest key + 1, and a key must never name two runs (another
  // connection may still know the pruned run's key): the run with the highest key leaves this.
  tombstone: "UPDATE runs SET status = 'pruned', agent = '', doc = '{}', lease_until = NULL, vars_key = 0, crc = ? WHERE rk = ?",
  dropTombstones: "DELETE FROM runs WHERE status = 'pruned' AND rk < (SELECT MAX(rk) FROM runs)",
  deleteJournal: "DELETE FROM journal WHERE k >= ? AND k < ?",
  deleteEffects: "DELETE FROM effects WHERE run_id = ?",
  deleteCommands: "DELETE FROM commands WHERE run_id = ?",
  deleteRun: "DELETE FROM runs WHERE rk = ? AND status IN ('completed', 'failed', 'cancelled')",
  runVersions: "SELECT id, json_extract(doc, '$.version') AS version FROM runs WHERE id IN (SELECT value FROM json_each(?))",
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
  /** How often `watchRuns` looks for commits by other connections (one cheap pragma). Default 10 ms. */
  watchPollMs?: number;
  /**
   * How long one transaction of group commit applies the writes that wait before it commits
   * those it has and lets the loop turn (ms; see group-commit.ts). Default 4; `Infinity` bounds
   * a transaction by its 64 writes alone.
   */
  commitBudgetMs?: number;
}

/** Page size of a new file: a ~1 KB message fits seven to a page instead of three. */
const newFilePageSize = 8192;
/** Write transactions on one connection before its checkpoints move to a worker thread. */
const checkpointerAfterWrites = 64;
/**
 * The WAL's bound while the worker thread checkpoints. A writer that never pauses never lets the
 * thread catch up completely, and only a WAL that is fully copied can start again from its
 * beginning; so once the WAL holds this much, SQLite's automatic checkpoint runs in the writer's
 * commit, copies what the thread has not, and the next transaction reuses the file from the
 * start. Writing over a file's existing blocks costs about two thirds of extending it (22 against
 * 35 µs for a step's commit on this machine's ext4), and a 20,000-page bound let the WAL grow to
 * 164 MB in a busy run before it was reused.
 */
const walBoundBytes = 32 * 1024 * 1024;

/** The embedded default store: one SQLite file in WAL mode, shared safely by several processes. */
export class SqliteStore implements Store {
  readonly kind = "sqlite";
  readonly path: string;
  private readonly db: Database.Database;
  private readonly prepared: Record<StatementName, Database.Statement>;
  private closed = false;
  /** Run id → run key; a run's key never changes and runs are never deleted. */
  private readonly runKeys = new Map<string, number>();
  /** Writes through this connection: starts the checkpoint thread, and is half the change marker. */
  private writes = 0;
  private checkpointer: WalCheckpointer | undefined;
  /** `watchRuns` callbacks, and the one timer that looks for other connections' commits. */
  private readonly watchers = new Set<(runId: string) => void>();
  private watchTimer: NodeJS.Timeout | undefined;
  private readonly watchPollMs: number;

  constructor(options: SqliteStoreOptions) {
    this.path = options.path;
    this.watchPollMs = options.watchPollMs ?? 10;
    const batches = { budgetMs: options.commitBudgetMs };
    this.creates = new GroupCommit(
      (creation) => this.createSync(creation),
      (creations, more) => this.createBatch(creations, more),
      batches,
    );
    this.updates = new GroupCommit(
      (update) => this.updateSync(update),
      (updates, more) => this.updateBatch(updates, more),
      batches,
    );
    const inMemory = options.path === ":memory:";
    const existed = !inMemory && hasContent(options.path);
    if (!inMemory && !existed) mkdirSync(dirname(options.path), { recursive: true });
    try {
      this.db = new Database(options.path, { timeout: options.busyTimeoutMs ?? 5000 });
      // Takes effect only in a new, empty file (before WAL mode and the first table).
      if (!existed) this.db.pragma(`page_size = ${newFilePageSize}`);
      this.db.pragma("journal_mode = WAL");
      // WAL with synchronous=NORMAL survives any process crash (SIGKILL included); only an OS
      // crash or power loss can lose the last transactions.
      this.db.pragma("synchronous = NORMAL");
      ensureLayout(this.db, options.path);
    } catch (error) {
      if (TetherError.isInstance(error)) throw error;
      throw new TetherError("store_error", `cannot open the sqlite store at ${options.path}: ${(error as Error).message}`, undefined, { cause: error });
    }
    this.prepared = preparedOnFirstUse(this.db, statementSql);
  }

  /** The prepared statements; once the store is closed, a `store_error` that says so. */
  private get statements(): Record<StatementName, Database.Statement> {
    if (this.closed) throw this.closedError();
    return this.prepared;
  }

  /** The connection for a statement prepared on the spot; once the store is closed, a `store_error` that says so. */
  private connection(): Database.Database {
    if (this.closed) throw this.closedError();
    return this.db;
  }

  private closedError(): TetherError {
    return new TetherError("store_error", `the sqlite store at ${this.path} is closed`);
  }

  /** The raw database, for tests that corrupt bytes on purpose and for the benchmark. */
  get database(): Database.Database {
    return this.db;
  }

  /** The run's integer key (its journal entries and messages are keyed by it), or undefined. */
  runKey(runId: string): number | undefined {
    let rk = this.runKeys.get(runId);
    if (rk === undefined) {
      rk = (this.statements.runKey.get(runId) as { rk: number } | undefined)?.rk;
      if (rk !== undefined) this.runKeys.set(runId, rk);
    }
    return rk;
  }

  async createRun(run: NewRun, initial: SnapshotWrite, journal: JournalInput[]): Promise<RunRecord> {
    const { rk, record } = await this.creates.submit({ run, initial, journal });
    // Only once committed: a rolled-back run has no key.
    this.runKeys.set(run.id, rk);
    return record;
  }

  /**
   * Run creations: those that arrive in one turn of the loop commit together, as updates do (see
   * group-commit.ts). A burst of starts (a thousand in one turn) shares transactions of 64 and
   * lets the loop turn between them, instead of holding it for every one.
   */
  private readonly creates: GroupCommit<Creation, { rk: number; record: RunRecord }>;

  private createSync = this.wrapTransaction((creation: Creation) => this.applyCreate(creation));

  // One refused (a halt) or failed is rolled back alone.
  private createBatch = this.inOneTransaction((creation: Creation) => this.applyCreate(creation));

  private applyCreate = ({ run, initial, journal }: Creation): { rk: number; record: RunRecord } => {
    if (run.refuseIfHalted) {
      const halt = this.statements.haltOver.get(`agent:${run.agent}`) as { scope: string } | undefined;
      if (halt) throw new HaltedError(halt.scope);
    }
    const record = newRunRecord(run);
    const row: RunRow = { id: run.id, agent: run.agent, status: run.status, created_at: run.createdAt, updated_bucket: updatedBucket(run.createdAt), lease_until: null, vars_key: 0, doc: JSON.stringify(record) };
    const inserted = this.statements.insertRun.run(row.id, row.agent, row.status, row.created_at, row.updated_bucket, row.doc, sqliteRunChecksum(row));
    const rk = Number(inserted.lastInsertRowid);
    const state: RowState = { rk, record, varsKey: 0 };
    this.writeJournal(state, journal, initial);
    this.saveRecord(state, { status: "", bucket: -1 });
    return { rk, record: state.record };
  };

  async getRun(runId: string): Promise<RunRecord | undefined> {
    const row = this.statements.getRun.get(runId) as (StoredRunRow & { rk: number }) | undefined;
    if (!row) return undefined;
    this.runKeys.set(runId, row.rk);
    return this.sawStatus(this.recordOf(row));
  }

  /** Runs last seen pausing, cancelling or halted through this connection (see `stopping`). */
  private readonly stoppingRuns = new Set<string>();

  private sawStatus(run: RunRecord): RunRecord {
    if (stopping(run.status)) this.stoppingRuns.add(run.id);
    else this.stoppingRuns.delete(run.id);
    return run;
  }

  /** The record of a run row read back, once its checksum holds; `store_corrupt` naming the run when it does not. */
  private recordOf(row: StoredRunRow): RunRecord {
    if (!sqliteRunIntact(row)) {
      throw new StoreCorruptError(this.path, `run ${row.id}: its run row ${row.crc === null ? "has no checksum" : "fails its checksum"}`, { runId: row.id, row: "run row" });
    }
    return JSON.parse(row.doc) as RunRecord;
  }

  async listRuns(filter: RunFilter = {}, damaged?: DamagedRun[]): Promise<RunRecord[]> {
    const { where, params } = runsWhere(filter);
    const order = filter.updatedAfter === undefined ? "created_at DESC, id" : "updated_bucket, json_extract(doc, '$.updatedAt'), rk";
    const sql = `SELECT ${runChecksummedColumns} FROM runs WHERE ${where} ORDER BY ${order} LIMIT ?`;
    return intactRecords(this.connection().prepare(sql).all(...params, filter.limit ?? 100) as StoredRunRow[], (row) => this.recordOf(row), damaged);
  }

  async listRunRefs(filter: RunFilter = {}): Promise<RunRef[]> {
    const { where, params } = runsWhere(filter);
    return this.connection().prepare(`SELECT id, agent FROM runs WHERE ${where} ORDER BY created_at DESC, id LIMIT ?`).all(...params, filter.limit ?? 100) as RunRef[];
  }

  async update(update: RunUpdate): Promise<UpdateResult> {
    const control = controlled(update.set?.status);
    const ofStopping = !control && this.stoppingRuns.has(update.runId);
    const sameRun = (waiting: RunUpdate) => waiting.runId === update.runId;
    // A write of a run told to stop goes ahead of other runs' steps, after its own run's, in order.
    if (ofStopping) this.updates.promote(sameRun);
    const pending = this.updates.submit(update, control || ofStopping || madeElsewhere(update));
    // A control write goes ahead of its run's writes that wait (a call about to start then finds
    // the run pausing and does not start); they follow right after it, not behind other runs' steps.
    if (control) this.updates.promote(sameRun);
    const result = await pending;
    this.sawStatus(result.run);
    // A write its executing worker did not make: tell the watchers on this connection (other
    // connections see the commit through the data version).
    if (result.ok && (update.expect?.epoch === undefined || update.claim) && this.watchers.size > 0) this.changed(update.runId);
    return result;
  }

  private changed(runId: string): void {
    for (const watcher of this.watchers) {
      try {
        watcher(runId);
      } catch {
        // A watcher's failure is its own.
      }
    }
  }

  async watchRuns(onChange: (runId: string) => void): Promise<() => void> {
    this.watchers.add(onChange);
    if (!this.watchTimer) {
      let seen = this.dataVersion();
      this.watchTimer = setInterval(() => {
        if (!this.db.open) return;
        const now = this.dataVersion();
        if (now === seen) return;
        seen = now;
        this.changed("*");
      }, this.watchPollMs);
      this.watchTimer.unref?.();
    }
    return () => {
      this.watchers.delete(onChange);
      if (this.watchers.size === 0) {
        clearInterval(this.watchTimer);
        this.watchTimer = undefined;
      }
    };
  }

  /** Moves when another connection commits (never for this one's own writes). */
  private dataVersion(): number {
    return this.statements.dataVersion.pluck().get() as number;
  }

  async runVersions(runIds: readonly string[]): Promise<Map<string, number>> {
    const rows = this.statements.runVersions.all(JSON.stringify(runIds)) as { id: string; version: number }[];
    return new Map(rows.map((row) => [row.id, row.version]));
  }

  /** Run updates: those that arrive in one turn of the loop commit together (see group-commit.ts). */
  private readonly updates: GroupCommit<RunUpdate, UpdateResult>;

  private updateBatch = this.inOneTransaction((update: RunUpdate) => this.applyUpdate(update));

  private updateSync = this.wrapTransaction((update: RunUpdate): UpdateResult => this.applyUpdate(update));

  private applyUpdate = (update: RunUpdate): UpdateResult => {
    const rk = this.runKey(update.runId);
    if (rk === undefined) throw new RunNotFoundError(update.runId);
    const row = this.statements.getRunByKey.get(rk) as StoredRunRow;
    const current = this.recordOf(row);
    if (!expectationsHold(current, update.expect)) return { ok: false, run: current };
    // Dated in journal order first: the record's `updatedAt` is the last entry's time as written.
    const entries = inJournalOrder(current.updatedAt, update.journal ?? []);
    const record = applyRunPatch(current, entries === update.journal ? update : { ...update, journal: entries });
    const state: RowState = { rk, record, varsKey: row.vars_key };
    const journal = this.writeJournal(state, entries, update.snapshot);
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
    const settle = update.settleCommands;
    if (settle) for (const [type, outcome] of Object.entries(settle.outcomes)) this.statements.settleCommands.run(settle.at, outcome, update.runId, type);
    this.saveRecord(state, { status: row.status, bucket: row.updated_bucket });
    return { ok: true, run: state.record, journal };
  };

  /**
   * One transaction for a batch of group commit, the items after the first only while `more()`
   * says so. The items are applied as they are; when one throws, that transaction is rolled back
   * and the batch applied again in another, each item in its own savepoint (a transaction
   * function called inside a transaction), so the one that throws is rolled back alone and fails
   * only its own caller. A savepoint for every item, each time, cost a tenth of a step's CPU at a
   * thousand concurrent runs (bench/profile-concurrency.ts, three interleaved rounds), and an item
   * seldom throws (a creation refused by a halt, an update of a run that is gone).
   */
  private inOneTransaction<T, R>(apply: (item: T) => R): (items: readonly T[], more: () => boolean) => Outcome<R>[] {
    let itemFailed = false;
    const together = this.wrapTransaction((items: readonly T[], more: () => boolean) =>
      applyWhile(items, more, (item): Outcome<R> => {
        try {
          return { ok: true, value: apply(item) };
        } catch (error) {
          itemFailed = true;
          throw error;
        }
      }),
    );
    let savepoint: Database.Transaction<(item: T) => R> | undefined;
    const apart = this.wrapTransaction((items: readonly T[], more: () => boolean) => {
      const inSavepoint = (savepoint ??= this.db.transaction(apply));
      return applyWhile(items, more, (item): Outcome<R> => {
        try {
          return { ok: true, value: inSavepoint(item) };
        } catch (error) {
          return { ok: false, error: this.storeError(error) };
        }
      });
    });
    return (items, more) => {
      itemFailed = false;
      try {
        return together(items, more);
      } catch (error) {
        // The transaction itself failed (the lock, the disk): so would the second.
        if (!itemFailed) throw error;
        return apart(items, more);
      }
    };
  }

  private wrapTransaction<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
    // Built once, on first use (the database is opened after the field initialisers run).
    let transaction: Database.Transaction<(...args: A) => R> | undefined;
    return (...args: A) => {
      let result: R;
      try {
        transaction ??= this.db.transaction(fn);
        // IMMEDIATE takes the write lock up front, so two processes never deadlock on upgrade.
        result = transaction.immediate(...args);
      } catch (error) {
        throw this.storeError(error);
      }
      this.wrote();
      return result;
    };
  }

  /** A failed write as callers see it: Tether's own errors as they are, SQLite's as `store_error`. */
  private storeError(error: unknown): TetherError {
    if (TetherError.isInstance(error)) return error;
    if (this.closed) return this.closedError();
    return new TetherError("store_error", `sqlite store at ${this.path}: ${(error as Error).message}`, undefined, { cause: error });
  }

  /**
   * Counts a write through this connection, whichever path made it: half the change marker, and
   * what hands the connection's checkpoints to the worker thread once it writes enough.
   */
  private wrote(): void {
    this.writes += 1;
    if (this.writes >= checkpointerAfterWrites && !this.checkpointer) this.startCheckpointer();
  }

  /** A connection that keeps writing checkpoints from a worker thread from now on. */
  private startCheckpointer(): void {
    if (this.path === ":memory:" || this.checkpointer) return;
    this.checkpointer = new WalCheckpointer(this.path, () => {
      if (this.db.open) this.db.pragma("wal_autocheckpoint = 1000");
    });
    const pageSize = Number(this.db.pragma("page_size", { simple: true }));
    this.db.pragma(`wal_autocheckpoint = ${Math.max(1000, Math.floor(walBoundBytes / pageSize))}`);
  }

  private saveRecord(state: RowState, stored: { status: string; bucket: number }): void {
    const { record } = state;
    const row: RunRow = {
      id: record.id,
      agent: record.agent,
      status: record.status,
      created_at: record.createdAt,
      updated_bucket: updatedBucket(record.updatedAt),
      lease_until: record.lease?.until ?? null,
      vars_key: state.varsKey,
      doc: JSON.stringify(record),
    };
    // The checksum covers the indexed columns too, written or kept as they are.
    const crc = sqliteRunChecksum(row);
    if (row.status === stored.status && row.updated_bucket === stored.bucket) this.statements.saveRun.run(row.lease_until, row.vars_key, row.doc, crc, state.rk);
    else this.statements.saveRunIndexed.run(row.status, row.updated_bucket, row.lease_until, row.vars_key, row.doc, crc, state.rk);
  }

  /** The entries, numbered on from the run's last; a snapshot goes on the last of them, its new messages beside. */
  private writeJournal(state: RowState, entries: JournalInput[], snapshot: SnapshotWrite | undefined): JournalEntry[] {
    const { record, rk } = state;
    if (snapshot && entries.length === 0) {
      throw new TetherError("invalid_input", `a snapshot of run ${record.id} must be written with the journal entry that records the change`);
    }
    const written: JournalEntry[] = [];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      const seq = ++record.journalSeq;
      const k = entryKey(rk, seq);
      const data = JSON.stringify(entry.data);
      if (snapshot && i === entries.length - 1) this.writeSnapshot(state, snapshot, k, entry, data);
      else {
        const row = { k, type: journalTypeCode[entry.type], at: entry.at, call_seq: entry.callSeq ?? null, data };
        this.statements.insertJournal.run(row.k, row.type, row.at, row.call_seq, row.data, rowChecksum(row));
      }
      written.push({ ...entry, runId: record.id, seq });
    }
    return written;
  }

  private writeSnapshot(state: RowState, snapshot: SnapshotWrite, k: number, entry: JournalInput, data: string): void {
    const { record } = state;
    const { head } = snapshot;
    const appended = snapshot.appendMessages;
    // The row just before the entry: one leaf page takes both.
    if (appended.length > 0) {
      const messages = { k: k - 1, type: messagesRowType, at: entry.at, call_seq: null, data: messagesRowData(appended) };
      this.statements.insertMessages.run(messages.k, messages.type, messages.at, messages.data, rowChecksum(messages));
    }
    const seq = record.snapshotSeq + 1;
    if (snapshot.varsJson !== undefined) state.varsKey = k;
    const row = {
      k,
      type: journalTypeCode[entry.type],
      at: entry.at,
      call_seq: entry.callSeq ?? null,
      data,
      snap_seq: seq,
      snap_step: head.step,
      msg_count: head.messageCount,
      chain: Number.parseInt(head.chain, 16),
      checksum: Buffer.from(head.checksum, "hex"),
      schema_version: head.schemaVersion,
      snap_at: head.at === entry.at ? null : head.at,
      vars_key: state.varsKey === k ? null : state.varsKey,
    };
    this.statements.insertJournalWithSnapshot.run(
      row.k,
      row.type,
      row.at,
      row.call_seq,
      row.data,
      row.snap_seq,
      row.snap_step,
      row.msg_count,
      row.chain,
      row.checksum,
      row.schema_version,
      row.snap_at,
      snapshot.varsJson ?? null,
      row.vars_key,
      rowChecksum(row),
    );
    record.snapshotSeq = seq;
    record.snapshotAt = head.at;
  }

  async readJournal(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<JournalEntry[]> {
    const rk = this.runKey(runId);
    const afterSeq = Math.max(0, Math.floor(options.afterSeq ?? 0));
    if (rk === undefined || afterSeq >= perRun / 2) return [];
    const rows = this.statements.readJournal.all(entryKey(rk, afterSeq), rowKey(rk + 1, 0), options.limit ?? 1000) as StoredRow[];
    const base = rowKey(rk, 0);
    return rows.map((row) => {
      const seq = (row.k - base) / 2;
      if (!rowIntact(row)) throw new StoreCorruptError(this.path, `run ${runId}: journal entry ${seq} fails its checksum`, { runId, seq });
      return {
        runId,
        seq,
        type: journalTypeOf(row.type),
        at: row.at,
        ...(row.call_seq === null ? {} : { callSeq: row.call_seq }),
        data: JSON.parse(row.data),
      };
    });
  }

  async loadState(runId: string, options: { atStep?: number } = {}): Promise<StoredState> {
    const rk = this.runKey(runId);
    if (rk === undefined) throw new RunNotFoundError(runId);
    const [from, to] = [rowKey(rk, 0), rowKey(rk + 1, 0)];
    const row = (
      options.atStep === undefined ? this.statements.latestSnapshot.get(from, to) : this.statements.snapshotAtStep.get(from, to, options.atStep)
    ) as StoredSnapshotRow | undefined;
    if (!row) throw new SnapshotCorruptError(runId, options.atStep === undefined ? "no snapshot row" : `no snapshot at or before step ${options.atStep}`);
    if (!rowIntact(row)) throw new SnapshotCorruptError(runId, `journal entry ${(row.k - from) / 2}, which carries snapshot ${row.snap_seq}, fails its checksum`);
    const varsRow = (row.vars_key === null ? row : this.statements.snapshotVars.get(row.vars_key)) as { vars: string | null; snap_seq: number | null } | undefined;
    if (!varsRow || varsRow.vars === null || varsRow.snap_seq === null) throw new SnapshotCorruptError(runId, `the vars of snapshot ${row.snap_seq} are missing`);
    const head = snapshotHeadOf(row, from, varsRow.snap_seq);
    // The snapshot's chain is a checksum over every message body in order: when the bodies read
    // give the chain the head names, they are intact, and the rows' own checksums are only read
    // to say which row is damaged when they do not.
    const messages = this.intactMessages(from, row.k, head);
    if (messages) return { head, varsJson: varsRow.vars, messages, verifiedChain: head.chain };
    let bodies: string[];
    try {
      const rows = this.statements.readMessages.all(from, row.k) as StoredRow[];
      const damaged = rows.find((r) => !rowIntact(r));
      if (damaged) throw new Error(`the messages stored with journal entry ${(damaged.k + 1 - from) / 2} fail their checksum`);
      bodies = messagesInRows(rows.map((r) => r.data));
    } catch (error) {
      throw new SnapshotCorruptError(runId, `unreadable messages before snapshot ${row.snap_seq}: ${(error as Error).message}`);
    }
    // Every row intact and still not the head's chain: the engine's check says how they differ.
    return { head, varsJson: varsRow.vars, messages: bodies };
  }

  /** The message bodies before journal row `end`, if they are exactly what `head` names (count and chain). */
  private intactMessages(from: number, end: number, head: SnapshotHead): string[] | undefined {
    try {
      const bodies = messagesInRows(this.statements.readMessageData.pluck().all(from, end) as string[]);
      return bodies.length === head.messageCount && extendChain(emptyChain, bodies) === head.chain ? bodies : undefined;
    } catch {
      return undefined;
    }
  }

  async readMessages(runId: string, indexes: readonly number[]): Promise<Map<number, string>> {
    const found = new Map<number, string>();
    const rk = this.runKey(runId);
    if (rk === undefined) return found;
    for (const index of indexes) {
      if (!Number.isInteger(index) || index < 0) continue;
      const body = this.messageAt(runId, rk, index);
      if (body !== undefined) found.set(index, body);
    }
    return found;
  }

  /**
   * Message `index` of the run keyed `rk`: message counts only grow from one snapshot to the
   * next, so a binary search over the entries finds the snapshot that appended it, and the row
   * before that snapshot's entry holds it.
   */
  private messageAt(runId: string, rk: number, index: number): string | undefined {
    const base = rowKey(rk, 0);
    const countAt = (key: number) => this.statements.messageCountAt.get(base, key) as { k: number; msg_count: number } | undefined;
    const latest = countAt(rowKey(rk + 1, 0) - 1);
    if (!latest || latest.msg_count <= index) return undefined;
    // The first entry number whose latest snapshot holds more than `index` messages.
    let low = 1;
    let high = (latest.k - base) / 2;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      if ((countAt(entryKey(rk, middle))?.msg_count ?? 0) > index) high = middle;
      else low = middle + 1;
    }
    const snapshot = countAt(entryKey(rk, low));
    if (!snapshot) return undefined;
    const row = this.statements.messagesRow.get(snapshot.k - 1) as StoredRow | undefined;
    if (row === undefined) return undefined;
    try {
      if (!rowIntact(row)) throw new Error("they fail their checksum");
      const bodies = messagesInRows([row.data]);
      return bodies[index - (snapshot.msg_count - bodies.length)];
    } catch (error) {
      throw new SnapshotCorruptError(runId, `unreadable messages before journal entry ${(snapshot.k - rowKey(rk, 0)) / 2}: ${(error as Error).message}`);
    }
  }

  async insertCommand(command: CommandRecord): Promise<void> {
    this.insertCommandSync(command);
    this.wrote();
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
    return (this.statements.listCommands.all(runId) as CommandRow[]).map(commandFromRow);
  }

  async listEffects(runId: string): Promise<EffectRecord[]> {
    return (this.statements.listEffects.all(runId) as EffectRow[]).map((row) => effectFromRow(runId, row));
  }

  async listHalts(): Promise<HaltRecord[]> {
    return this.statements.listHalts.all() as HaltRecord[];
  }

  async setHalt(halt: HaltRecord): Promise<void> {
    this.statements.setHalt.run(halt.scope, halt.actor, halt.reason, halt.at);
    this.wrote();
    this.changed("*");
  }

  async clearHalt(scope: string): Promise<boolean> {
    this.wrote();
    return this.statements.clearHalt.run(scope).changes > 0;
  }

  async findClaimable(now: number, limit: number): Promise<RunRecord[]> {
    // A damaged row is passed over, not claimed (its record cannot be trusted) nor thrown (a worker
    // would claim no other run): it stays as it is, refused when read and named by `tether verify`.
    return intactRecords(this.statements.claimable.all(now, limit) as StoredRunRow[], (row) => this.recordOf(row));
  }

  async runStorage(runId: string): Promise<RunStorage | undefined> {
    const rk = this.runKey(runId);
    if (rk === undefined || !(await this.getRun(runId))) return undefined;
    return this.sizeOf(runId, rk);
  }

  private sizeOf(runId: string, rk: number): RunStorage {
    const [from, to] = [rowKey(rk, 0), rowKey(rk + 1, 0)];
    const journal = this.statements.journalSize.get(from, to, from, to) as { entries: number | null; bytes: number | null; messages: number | null };
    const effects = this.statements.effectsSize.get(runId) as { n: number; bytes: number };
    const commands = this.statements.commandsSize.get(runId) as { n: number; bytes: number };
    return {
      journalEntries: journal.entries ?? 0,
      messages: journal.messages ?? 0,
      effects: effects.n,
      commands: commands.n,
      bytes: (journal.bytes ?? 0) + effects.bytes + commands.bytes,
    };
  }

  async prune(options: PruneOptions): Promise<PruneReport> {
    const report: PruneReport = { runs: 0, journalEntries: 0, messages: 0, bytes: 0, batches: 0 };
    const batchSize = Math.max(1, Math.floor(options.batchSize ?? 200));
    let afterRk = 0;
    for (;;) {
      const batch = this.pruneBatch(options, batchSize, afterRk, report);
      if (batch.count === 0) return report;
      afterRk = batch.lastRk;
      report.batches += 1;
      // Between batches the event loop turns: running work writes before the next batch.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private pruneBatch = this.wrapTransaction((options: PruneOptions, limit: number, afterRk: number, report: PruneReport): { count: number; lastRk: number } => {
    const rows = this.statements.prunable.all(updatedBucket(options.before), options.before, afterRk, limit) as (StoredRunRow & { rk: number; doc_bytes: number })[];
    let lastRk = afterRk;
    for (const row of rows) {
      lastRk = row.rk;
      // A damaged run row (its status or time may be the damage) is never pruned: it stays for `tether verify` to name.
      if (!sqliteRunIntact(row)) continue;
      const size = this.sizeOf(row.id, row.rk);
      report.runs += 1;
      report.journalEntries += size.journalEntries;
      report.messages += size.messages;
      report.bytes += size.bytes + row.doc_bytes;
      if (options.dryRun) continue;
      this.statements.deleteJournal.run(rowKey(row.rk, 0), rowKey(row.rk + 1, 0));
      this.statements.deleteEffects.run(row.id);
      this.statements.deleteCommands.run(row.id);
      if (row.rk === (this.statements.maxRunKey.pluck().get() as number)) {
        const tombstone: RunRow = { id: row.id, agent: "", status: "pruned", created_at: row.created_at, updated_bucket: row.updated_bucket, lease_until: null, vars_key: 0, doc: "{}" };
        this.statements.tombstone.run(sqliteRunChecksum(tombstone), row.rk);
      } else this.statements.deleteRun.run(row.rk);
      this.runKeys.delete(row.id);
    }
    if (!options.dryRun) this.statements.dropTombstones.run();
    return { count: rows.length, lastRk };
  });

  async saveToken(token: ApiTokenRecord): Promise<void> {
    this.statements.saveToken.run(token.id, token.name, token.role, token.hash, token.createdAt, token.revokedAt);
    this.wrote();
  }

  async findTokenByHash(hash: string): Promise<ApiTokenRecord | undefined> {
    const row = this.statements.tokenByHash.get(hash) as TokenRow | undefined;
    return row ? tokenFromRow(row) : undefined;
  }

  async listTokens(): Promise<ApiTokenRecord[]> {
    return (this.statements.listTokens.all() as TokenRow[]).map(tokenFromRow);
  }

  async revokeToken(id: string, at: number): Promise<ApiTokenRecord | undefined> {
    if (this.statements.revokeToken.run(at, id).changes > 0) this.wrote();
    const row = this.statements.tokenById.get(id) as TokenRow | undefined;
    return row ? tokenFromRow(row) : undefined;
  }

  /**
   * SQLite's data version moves when another connection commits; this connection's own writes
   * (every write goes through a transaction here) are counted beside it.
   */
  changeMarker(): string {
    return `${this.statements.dataVersion.pluck().get() as number}:${this.writes}`;
  }

  async close(): Promise<void> {
    // Writes waiting for their turn's commit are committed, not dropped.
    if (this.db.open) {
      this.creates.flushAll();
      this.updates.flushAll();
    }
    this.closed = true;
    clearInterval(this.watchTimer);
    this.watchTimer = undefined;
    this.watchers.clear();
    const checkpointer = this.checkpointer;
    this.checkpointer = undefined;
    // Its connection closes first, so this one is the last and checkpoints and removes the WAL.
    await checkpointer?.close();
    if (this.db.open) this.db.close();
  }
}

function hasContent(path: string): boolean {
  try {
    return statSync(path).size > 0;
  } catch {
    return false;
  }
}

/** What a write transaction carries along for one run. */
interface RowState {
  rk: number;
  record: RunRecord;
  /** Key of the journal entry holding the vars in force. */
  varsKey: number;
}

/** A run row as read back, with the checksum it was written with. */
type StoredRunRow = RunRow & { crc: number | null };

/** A journal row as read back, with the checksum it was written with. */
type StoredRow = ChecksummedRow & { crc: number | null };

/** A journal entry that carries a snapshot. */
type StoredSnapshotRow = SnapshotRow & StoredRow;


/** The WHERE clause of a listing of runs (never a pruned one's leftover row) and its parameters. */
function runsWhere(filter: RunFilter): { where: string; params: unknown[] } {
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
  if (filter.statusReason !== undefined) {
    where.push("json_extract(doc, '$.statusReason') = ?");
    params.push(filter.statusReason);
  }
  if (filter.updatedAfter !== undefined) {
    // The indexed bucket is the time rounded up, so it narrows to a superset; the record's own time decides.
    where.push("updated_bucket > ? AND json_extract(doc, '$.updatedAt') > ?");
    params.push(filter.updatedAfter, filter.updatedAfter);
  }
  where.push("status != 'pruned'");
  return { where: where.join(" AND "), params };
}

/** What `createRun` writes, as one item of the creations committed together. */
interface Creation {
  run: NewRun;
  initial: SnapshotWrite;
  journal: JournalInput[];
}

/** The outcome of each item in order, the items after the first only while `more()` says so. */
function applyWhile<T, R>(items: readonly T[], more: () => boolean, one: (item: T) => Outcome<R>): Outcome<R>[] {
  const outcomes: Outcome<R>[] = [];
  for (const item of items) {
    if (outcomes.length > 0 && !more()) break;
    outcomes.push(one(item));
  }
  return outcomes;
}
