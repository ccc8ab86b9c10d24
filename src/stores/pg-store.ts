import { createHash } from "node:crypto";
import pg from "pg";
import { HaltedError, RunNotFoundError, SnapshotCorruptError, StoreCorruptError, TetherError } from "../engine/errors.js";
import { applyRunPatch, expectationsHold, inJournalOrder, newRunRecord } from "../engine/run-record.js";
import type {
  ApiTokenRecord,
  CommandRecord,
  DamagedRun,
  EffectRecord,
  EffectWrite,
  HaltRecord,
  JournalEntry,
  JournalInput,
  JournalType,
  NewRun,
  PruneOptions,
  PruneReport,
  RunFilter,
  RunRef,
  RunStorage,
  RunRecord,
  RunUpdate,
  SnapshotWrite,
  Store,
  StoredState,
  UpdateResult,
} from "../engine/store.js";
import { intactRecords } from "./damaged-runs.js";
import {
  migrate,
  pgChecksummedColumns,
  pgMessageIntact,
  pgRowChecksum,
  pgRowIntact,
  pgRunChecksum,
  pgRunColumns,
  pgRunIntact,
  pgTypes as types,
  quoteIdentifier,
  updatedBucket,
  type PgChecksummedRow,
  runRowOf,
  type PgRunRow,
} from "./pg-schema.js";
import { controlled, madeElsewhere, stopping } from "./control-writes.js";
import { readRunNotice, runNotice } from "./pg-notice.js";
import { messageChecksum } from "./row-checksum.js";
import { commandFromRow, effectFromRow, tokenFromRow, type CommandRow, type EffectRow, type TokenRow } from "./store-rows.js";

export interface PostgresStoreOptions {
  /** A `postgres://` connection string. */
  connectionString: string;
  /** The schema that holds Tether's tables (created if missing). Default `tether`. */
  schema?: string;
  /** Connections in the pool. Default 10. */
  poolSize?: number;
  /**
   * Create the schema when it holds no Tether store (default true). False for a command that only
   * reads or controls runs: it is refused with `not_found`, so a mistyped `?schema=` creates nothing.
   */
  create?: boolean;
}

/** What this process last wrote or read of a run: an update whose version still matches needs no read. */
interface CachedRun {
  doc: string;
  version: number;
  varsSeq: number;
  status: string;
}

const maxCachedRuns = 20_000;

/**
 * The PostgreSQL store, on a pooled `pg` client. Every write is one statement (one round trip,
 * its own transaction): the run's row is updated only if its version is the one this process
 * read, and the journal entries, messages, effects and commands of the update are inserted by
 * the same statement only when it did. A write that finds the row moved reads it again, checks
 * the update's expectations against it, and retries.
 *
 * Writes by anyone but the run's lease holder (control commands, claims) notify
 * `<schema>_runs` with the run id, for the workers that LISTEN (see `watchRuns`).
 */
export class PostgresStore implements Store {
  readonly kind = "postgres";
  readonly schema: string;
  private readonly pool: pg.Pool;
  /**
   * Every write of a run that is or becomes pausing, paused, cancelling or halted (a pause, a
   * cancel, a resume, the executor stopping), the reads of a notified run, and the reads of a run
   * seen stopping go through their own two connections, so they never queue behind a busy
   * worker's step writes.
   */
  private readonly controlPool: pg.Pool;
  private readonly s: string;
  private readonly channel: string;
  private readonly cache = new Map<string, CachedRun>();
  private renewals: Renewal[] = [];
  /** Steps waiting for the main pool, in the order they came (see `stepTogether`). */
  private readonly steps = new Set<StepWrite>();
  /** Statements of steps under way, and the steps waiting to send one (see `stepLane`). */
  private stepStatements = 0;
  private readonly stepLaneQueue: { step: StepWrite; resolve: (send: boolean) => void }[] = [];
  private readonly mainSize: number;
  private mainBusy = 0;
  private readonly mainQueue: { resolve: (turn: boolean) => void; stale: Stale | undefined }[] = [];
  /** Per run, the executing worker's write in progress here (see `update`). */
  private readonly writing = new Map<string, Promise<void>>();
  private ready: Promise<void>;
  private readonly watchers = new Set<(runId: string, record?: RunRecord) => void>();
  private listening: Promise<void> | undefined;
  private listenClient: pg.Client | undefined;
  private closed = false;
  private stepsSqlText: string | undefined;
  private createsSqlText: string | undefined;
  /** Creations waiting for the main pool, in the order they came (see `createTogether`). */
  private readonly creations = new Set<Creation>();
  private readonly singleStepSqlText = new Map<number, string>();

  constructor(private readonly options: PostgresStoreOptions) {
    this.schema = options.schema ?? "tether";
    this.s = quoteIdentifier(this.schema);
    this.channel = `${this.schema}_runs`;
    this.mainSize = options.poolSize ?? 10;
    // Named in pg_stat_activity (an `application_name` in the URL wins).
    const named = { connectionString: options.connectionString, application_name: "tether", types };
    this.pool = new pg.Pool({ ...named, max: this.mainSize });
    this.controlPool = new pg.Pool({ ...named, max: 2 });
    // An idle connection that fails (the server restarted) is dropped by the pool; no crash.
    this.pool.on("error", () => undefined);
    this.controlPool.on("error", () => undefined);
    this.ready = migrate(this.pool, this.schema, { create: options.create ?? true, where: redactUrl(options.connectionString) }).catch((error: unknown) => {
      throw storeError(`cannot open the PostgreSQL store (${redactUrl(options.connectionString)}, schema ${this.schema})`, error);
    });
    this.ready.catch(() => undefined);
  }

  /** Resolves once the schema is migrated; rejects with `store_error` when the database cannot be reached. */
  async open(): Promise<this> {
    await this.ready;
    return this;
  }

  /**
   * Runs a statement; every statement is prepared (named by a hash of its text) on each pooled
   * connection the first time that connection runs it, so a step's write is not planned again.
   */
  private async query<R extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params: unknown[] = [], via?: pg.PoolClient | pg.Pool): Promise<pg.QueryResult<R>> {
    return (await this.queryUnless(undefined, sql, params, via))!;
  }

  /**
   * `query`, or undefined without a round trip when `stale.check()` holds before the statement is
   * sent: checked when its turn for the main pool comes, and at once when a newer row of run
   * `stale.runId` is read meanwhile (a notified pause).
   */
  private async queryUnless<R extends pg.QueryResultRow>(stale: Stale | undefined, sql: string, params: unknown[], via?: pg.PoolClient | pg.Pool, first = false): Promise<pg.QueryResult<R> | undefined> {
    if (this.closed) throw this.closedError();
    await this.ready;
    const main = via === undefined;
    if (main && !(await this.mainTurn(stale, first))) return undefined;
    try {
      return await (via ?? this.pool).query<R>({ name: statementName(sql), text: sql, values: params });
    } catch (error) {
      if (TetherError.isInstance(error)) throw error;
      // A statement sent, or waiting for its turn, when the store was closed.
      if (this.closed) throw this.closedError();
      throw storeError("PostgreSQL store", error);
    } finally {
      if (main) this.mainDone();
    }
  }

  private closedError(): TetherError {
    return new TetherError("store_error", `the PostgreSQL store (schema ${this.schema}) is closed`);
  }

  /**
   * Waits for a free connection of the main pool: true once it has one, false (holding none) when
   * `stale` turned true first. The queue is this store's rather than the pool's so that a write
   * of a run paused while its step waited here is dropped, not sent to fail.
   */
  private mainTurn(stale?: Stale, first = false): Promise<boolean> {
    if (stale?.check()) return Promise.resolve(false);
    if (this.mainBusy < this.mainSize) {
      this.mainBusy += 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => (first ? this.mainQueue.unshift({ resolve, stale }) : this.mainQueue.push({ resolve, stale })));
  }

  private mainDone(): void {
    for (;;) {
      const next = this.mainQueue.shift();
      if (!next) {
        this.mainBusy -= 1;
        return;
      }
      if (next.stale?.check()) {
        next.resolve(false);
        continue;
      }
      next.resolve(true);
      return;
    }
  }

  /** A newer row of `runId` was read: its queued statements that can only fail leave the queue now. */
  private dropStale(runId: string): void {
    if (this.mainQueue.some((w) => w.stale?.runId === runId)) this.dropWhere((w) => w.stale?.runId === runId && w.stale.check());
  }

  /** Takes the waiters that match out of the main pool's queue, with no turn. */
  private dropWhere(drop: (waiting: { stale: Stale | undefined }) => boolean): void {
    const kept = this.mainQueue.filter((w) => {
      if (!drop(w)) return true;
      w.resolve(false);
      return false;
    });
    this.mainQueue.splice(0, this.mainQueue.length, ...kept);
  }

  async createRun(run: NewRun, initial: SnapshotWrite, journal: JournalInput[]): Promise<RunRecord> {
    const record = newRunRecord(run);
    const plan = this.writePlan(record, 0, journal, initial);
    const doc = JSON.stringify(plan.record);
    const crc = pgRunChecksum(runRowOf(plan.record, plan.varsSeq, doc));
    const halted = await this.createTogether({ run, plan, doc, crc });
    if (halted) throw new HaltedError(halted);
    this.remember(run.id, { doc, version: plan.record.version, varsSeq: plan.varsSeq, status: plan.record.status });
    return JSON.parse(doc) as RunRecord;
  }

  /**
   * A run's creation, written with the others waiting for the main pool: the one that gets a
   * connection writes every creation waiting then (up to `maxCreateBatch`) in one statement, as
   * steps go together (`stepTogether`). A burst of starts (a batch job, an API under load) costs
   * a few round trips and commits, not one each: a thousand starts at once took ~1 s on this
   * machine one by one, the statements' socket writes most of it. A lone start goes alone at once.
   * Resolves to the scope of the halt that refused it, or null once it is written.
   */
  private async createTogether(creation: Omit<Creation, "taken" | "done" | "finish">): Promise<string | null> {
    let finish!: (outcome: string | null | Error) => void;
    const done = new Promise<string | null | Error>((resolve) => (finish = resolve));
    const mine: Creation = { ...creation, taken: false, done, finish };
    this.creations.add(mine);
    // No turn needed once another creation's statement took this one. A turn refused while it
    // was not taken (no caller drops such a waiter today) is asked for again.
    for (;;) {
      const turn = await this.mainTurn({ runId: mine.run.id, check: () => mine.taken });
      if (turn || mine.taken) {
        if (turn) await this.writeWithTurn(mine);
        break;
      }
    }
    const outcome = await done;
    if (outcome instanceof Error) throw outcome;
    return outcome;
  }

  /** Holding a turn of the main pool: writes `mine` and the creations waiting beside it, unless another statement took it meanwhile. */
  private async writeWithTurn(mine: Creation): Promise<void> {
    try {
      if (mine.taken) return;
      const batch: Creation[] = [mine];
      mine.taken = true;
      this.creations.delete(mine);
      for (const waiting of this.creations) {
        if (batch.length >= maxCreateBatch) break;
        waiting.taken = true;
        this.creations.delete(waiting);
        batch.push(waiting);
      }
      // Those taken leave the pool's queue now rather than when their turn would have come.
      if (batch.length > 1) this.dropWhere((waiting) => waiting.stale?.check() === true);
      await this.writeCreations(batch);
    } finally {
      this.mainDone();
    }
  }

  /** Writes the creations (this one holds a turn of the main pool); each learns its outcome through `finish`. */
  private async writeCreations(batch: Creation[]): Promise<void> {
    if (batch.length === 1) {
      const [creation] = batch;
      await this.createOne(creation).then(creation.finish, (error: unknown) => creation.finish(error as Error));
      return;
    }
    let halted: Map<string, string | null>;
    try {
      halted = await this.createMany(batch);
    } catch {
      // A failed statement (a run id taken already) fails no other creation: each is written alone.
      for (const creation of batch) await this.createOne(creation).then(creation.finish, (error: unknown) => creation.finish(error as Error));
      return;
    }
    for (const creation of batch) creation.finish(halted.get(creation.run.id) ?? null);
  }

  /** One creation's statement: the run row, its first entries and messages, unless a halt refuses it. */
  private async createOne({ run, plan, doc, crc }: Creation): Promise<string | null> {
    // The halts that refuse it (none asked: no scope matches), read by the statement that inserts it.
    const haltScopes = run.refuseIfHalted ? ["*", `agent:${run.agent}`] : [];
    // The row's values as every write sets them (a run created claimed has its lease in them).
    const params: unknown[] = [run.id, run.agent, run.createdAt, ...runRowValues(plan.record, plan.varsSeq, doc, crc), haltScopes];
    const ctes = [
      `h AS (SELECT scope FROM ${this.s}.halts WHERE scope = ANY($13::text[]) ORDER BY at LIMIT 1)`,
      `upd AS (INSERT INTO ${this.s}.runs (id, agent, created_at, doc, status, updated_at, lease_until, epoch, version, vars_seq, updated_bucket, crc)
        SELECT $1::text, $2::text, $3::bigint, $4::text, $5::text, $6::bigint, $7::bigint, $8::int, $9::int, $10::int, $11::bigint, $12::bigint WHERE NOT EXISTS (SELECT 1 FROM h) RETURNING id)`,
    ];
    ctes.push(...this.childWrites(params, plan, {}));
    const { rows } = await this.query<{ halted: string | null }>(`WITH ${ctes.join(",\n")} SELECT (SELECT scope FROM h) AS halted`, params, this.pool);
    return rows[0]?.halted ?? null;
  }

  /** Several creations in one statement, as JSON record sets: per run, the scope of the halt that refused it, or null. */
  private async createMany(batch: Creation[]): Promise<Map<string, string | null>> {
    const runs = batch.map(({ run, plan, doc, crc }) => ({
      id: run.id,
      agent: run.agent,
      created_at: run.createdAt,
      doc,
      status: plan.record.status,
      updated_at: plan.record.updatedAt,
      lease_until: plan.record.lease?.until ?? null,
      epoch: plan.record.epoch,
      version: plan.record.version,
      vars_seq: plan.varsSeq,
      updated_bucket: updatedBucket(plan.record.updatedAt),
      crc,
      refuse: run.refuseIfHalted === true,
    }));
    const { journal, messages } = recordSets(batch.map(({ run, plan }) => ({ runId: run.id, plan })));
    const { rows } = await this.query<{ id: string; halted: string | null }>(this.createsSql, [JSON.stringify(runs), journal, messages], this.pool);
    return new Map(rows.map((row) => [row.id, row.halted]));
  }

  /** The statement of `createMany`, built once. */
  private get createsSql(): string {
    const s = this.s;
    return (this.createsSqlText ??= `WITH x AS (SELECT * FROM json_to_recordset($1::json) AS x(id text, agent text, created_at bigint, doc text, status text, updated_at bigint, lease_until bigint, epoch int, version int, vars_seq int, updated_bucket bigint, crc bigint, refuse boolean)),
      h AS (SELECT x.id, (SELECT scope FROM ${s}.halts WHERE x.refuse AND scope IN ('*', 'agent:' || x.agent) ORDER BY at LIMIT 1) AS halted FROM x),
      upd AS (INSERT INTO ${s}.runs (id, agent, created_at, doc, status, updated_at, lease_until, epoch, version, vars_seq, updated_bucket, crc)
        SELECT x.id, x.agent, x.created_at, x.doc, x.status, x.updated_at, x.lease_until, x.epoch, x.version, x.vars_seq, x.updated_bucket, x.crc FROM x JOIN h ON h.id = x.id WHERE h.halted IS NULL RETURNING id),
      ${childRecordSets(s)}
      SELECT id, halted FROM h`);
  }

  async getRun(runId: string): Promise<RunRecord | undefined> {
    const row = await this.readRow(runId);
    return row ? (JSON.parse(row.doc) as RunRecord) : undefined;
  }

  private async readRow(runId: string): Promise<CachedRun | undefined> {
    // A run this process last saw stopping is read on the control lane, like its writes.
    const lane = this.stopping(runId) ? this.controlPool : undefined;
    const { rows } = await this.query<StoredRunRow>(`SELECT ${pgRunColumns} FROM ${this.s}.runs WHERE id = $1`, [runId], lane);
    if (!rows[0]) {
      this.cache.delete(runId);
      return undefined;
    }
    const row = this.intactRow(rows[0]);
    this.remember(runId, row);
    return row;
  }

  /**
   * A run row read back, once its checksum holds: `store_corrupt` naming the run when it does not
   * (nothing is cached or deleted, and the record is never returned).
   */
  private intactRow(row: StoredRunRow): CachedRun {
    if (!pgRunIntact(row)) {
      this.cache.delete(row.id);
      throw new StoreCorruptError(`the PostgreSQL schema ${this.schema}`, `run ${row.id}: its run row ${row.crc === null ? "has no checksum" : "fails its checksum"}`, { runId: row.id, row: "run row" });
    }
    return { doc: row.doc, version: row.version, varsSeq: row.vars_seq, status: row.status };
  }

  /**
   * The runs a notification named, read together on the control lane: a pause reaches its
   * executor without queuing behind the worker's step writes.
   */
  async getRuns(runIds: readonly string[]): Promise<RunRecord[]> {
    if (runIds.length === 0) return [];
    const { rows } = await this.query<StoredRunRow>(`SELECT ${pgRunColumns} FROM ${this.s}.runs WHERE id = ANY($1::text[])`, [[...runIds]], this.controlPool);
    return rows.map((stored) => {
      const row = this.intactRow(stored);
      this.remember(stored.id, row);
      this.dropStale(stored.id);
      return JSON.parse(row.doc) as RunRecord;
    });
  }

  /** Keeps the newer of what is cached and `row` (a read may return after a newer write of this process). */
  private remember(runId: string, row: CachedRun): void {
    const cached = this.cache.get(runId);
    if (cached && cached.version > row.version) return;
    this.cache.delete(runId);
    this.cache.set(runId, row);
    if (this.cache.size > maxCachedRuns) this.cache.delete(this.cache.keys().next().value as string);
  }

  async listRuns(filter: RunFilter = {}, damaged?: DamagedRun[]): Promise<RunRecord[]> {
    const { where, params } = runsWhere(filter);
    params.push(filter.limit ?? 100);
    const order = filter.updatedAfter === undefined ? "created_at DESC, id" : "updated_at, id";
    const sql = `SELECT ${pgRunColumns} FROM ${this.s}.runs ${where} ORDER BY ${order} LIMIT $${params.length}`;
    return intactRecords((await this.query<StoredRunRow>(sql, params)).rows, (row) => JSON.parse(this.intactRow(row).doc) as RunRecord, damaged);
  }

  async listRunRefs(filter: RunFilter = {}): Promise<RunRef[]> {
    const { where, params } = runsWhere(filter);
    params.push(filter.limit ?? 100);
    return (await this.query<RunRef>(`SELECT id, agent FROM ${this.s}.runs ${where} ORDER BY created_at DESC, id LIMIT $${params.length}`, params)).rows;
  }

  async update(update: RunUpdate): Promise<UpdateResult> {
    if (update.snapshot && !update.journal?.length) {
      throw new TetherError("invalid_input", `a snapshot of run ${update.runId} must be written with the journal entry that records the change`);
    }
    // The executing worker's own writes of a run (fenced by its epoch; not a claim nor a command)
    // go one after another: a lease renewal sent while a step is being written would otherwise
    // lose the version race to it and queue again, and a busy pool makes each retry costly.
    if (madeElsewhere(update)) return this.updateNow(update);
    const runId = update.runId;
    const mine = (this.writing.get(runId) ?? Promise.resolve()).then(() => this.updateNow(update));
    const done = mine.then(
      () => undefined,
      () => undefined,
    );
    this.writing.set(runId, done);
    try {
      return await mine;
    } finally {
      if (this.writing.get(runId) === done) this.writing.delete(runId);
    }
  }

  private async updateNow(update: RunUpdate): Promise<UpdateResult> {
    if (renewalOnly(update) && this.cache.has(update.runId)) return new Promise((resolve, reject) => this.renewSoon({ update, resolve, reject }));
    return this.updateOne(update);
  }

  /**
   * Lease renewals (a write of nothing but `renewLease`, which the process's watcher sends for
   * every run in a long call at once) are written together: one statement for all those due in
   * this turn of the event loop, ahead of the steps waiting for the main pool, so a busy pool
   * neither doubles its statements nor lets leases run out. A renewal whose run moved meanwhile
   * is written on its own.
   */
  private renewSoon(renewal: Renewal): void {
    this.renewals.push(renewal);
    if (this.renewals.length === 1) setImmediate(() => void this.renewTogether());
  }

  private async renewTogether(): Promise<void> {
    const batch = this.renewals.splice(0);
    const planned: { renewal: Renewal; record: RunRecord; doc: string; varsSeq: number }[] = [];
    const alone: Renewal[] = [];
    for (const renewal of batch) {
      const row = this.cache.get(renewal.update.runId);
      const current = row && (JSON.parse(row.doc) as RunRecord);
      if (!row || !current || !expectationsHold(current, renewal.update.expect)) {
        alone.push(renewal);
        continue;
      }
      const record = applyRunPatch(current, renewal.update);
      planned.push({ renewal, record, doc: JSON.stringify(record), varsSeq: row.varsSeq });
    }
    if (planned.length > 0) {
      try {
        const rows = planned.map((p) => ({
          id: p.record.id,
          prev: p.record.version - 1,
          epoch: p.record.epoch,
          doc: p.doc,
          updated_at: p.record.updatedAt,
          lease_until: p.record.lease?.until ?? null,
          version: p.record.version,
          // Over the columns this statement keeps too: the version compared and the epoch fenced say they are the record's.
          crc: pgRunChecksum(runRowOf(p.record, p.varsSeq, p.doc)),
        }));
        const result = await this.queryUnless<{ id: string }>(
          undefined,
          `UPDATE ${this.s}.runs AS r SET doc = x.doc, updated_at = x.updated_at, lease_until = x.lease_until, version = x.version, crc = x.crc
           FROM json_to_recordset($1::json) AS x(id text, prev int, epoch int, doc text, updated_at bigint, lease_until bigint, version int, crc bigint)
           WHERE r.id = ANY($2::text[]) AND r.id = x.id AND r.version = x.prev AND r.epoch = x.epoch RETURNING r.id`,
          [JSON.stringify(rows), rows.map((row) => row.id)],
          undefined,
          true,
        );
        const written = new Set(result!.rows.map((row) => row.id));
        for (const p of planned) {
          if (!written.has(p.record.id)) {
            alone.push(p.renewal);
            continue;
          }
          this.remember(p.record.id, { doc: p.doc, version: p.record.version, varsSeq: p.varsSeq, status: p.record.status });
          p.renewal.resolve({ ok: true, run: JSON.parse(p.doc) as RunRecord, journal: [] });
        }
      } catch (error) {
        for (const p of planned) p.renewal.reject(error);
      }
    }
    for (const renewal of alone) this.updateOne(renewal.update).then(renewal.resolve, renewal.reject);
  }

  private async updateOne(update: RunUpdate): Promise<UpdateResult> {
    const cached = this.cache.get(update.runId);
    let row = cached ?? (await this.readRow(update.runId));
    // Whether `row` is the database's own, as of this update's last statement.
    let fromDatabase = cached === undefined;
    for (let attempt = 0; ; attempt++) {
      if (!row) throw new RunNotFoundError(update.runId);
      const current = JSON.parse(row.doc) as RunRecord;
      if (!expectationsHold(current, update.expect)) {
        // A cached row may be behind: only the database's own row can refuse.
        if (fromDatabase) return { ok: false, run: current };
        row = await this.readRow(update.runId);
        fromDatabase = true;
        continue;
      }
      const tried = await this.tryUpdate(update, current, row.varsSeq);
      if (tried.written) return tried.written;
      if (attempt > 50) throw new TetherError("store_error", `run ${update.runId} kept changing under an update; giving up after ${attempt} attempts`);
      row = tried.current;
      fromDatabase = true;
    }
  }

  /**
   * One statement: the row moves only from the version read, and everything else only with it.
   * When the row had moved (or the epoch fenced the write off), the same statement returns the row
   * as it is, so a retry needs no read of its own.
   */
  private async tryUpdate(update: RunUpdate, current: RunRecord, varsSeq: number, via?: pg.PoolClient): Promise<{ written: UpdateResult; current?: undefined } | { written?: undefined; current: CachedRun | undefined }> {
    // Dated in journal order first: the record's `updatedAt` is the last entry's time as written.
    const entries = inJournalOrder(current.updatedAt, update.journal ?? []);
    const plan = this.writePlan(applyRunPatch(current, entries === update.journal ? update : { ...update, journal: entries }), varsSeq, entries, update.snapshot);
    const { record } = plan;
    const doc = JSON.stringify(record);
    const crc = pgRunChecksum(runRowOf(record, plan.varsSeq, doc));
    // A write its executing worker did not make (not fenced by its epoch, a claim, or a control
    // command, which carries the epoch it was decided on): tell the workers.
    const notify = madeElsewhere(update);
    // Every write of a run that is (or becomes) pausing, paused, cancelling or halted takes the
    // control lane; a run's steps and its ending take the main pool.
    const lane = via ?? (controlled(current.status) || controlled(record.status) ? this.controlPool : undefined);
    // A newer row of the run, read here while this write waited for the main pool (a pause
    // notified): the statement could only fail, so it is not sent.
    const newer = { runId: update.runId, check: () => (this.cache.get(update.runId)?.version ?? 0) > current.version };
    // The executing worker's steps on the main pool are written together with the others waiting.
    const simple = !update.effects?.length && !update.insertCommand && !update.settleCommands && !update.claim;
    if (via === undefined && lane === undefined && !notify && simple && update.expect?.epoch !== undefined) {
      return this.stepTogether({ runId: update.runId, prev: current.version, fence: update.expect.epoch, record, doc, crc, plan, newer });
    }
    const params: unknown[] = [update.runId, current.version, ...runRowValues(record, plan.varsSeq, doc, crc)];
    let fence = "";
    if (update.expect?.epoch !== undefined) {
      params.push(update.expect.epoch);
      fence = ` AND epoch = $${params.length}`;
    }
    const ctes = [
      `upd AS (UPDATE ${this.s}.runs SET doc = $3, status = $4, updated_at = $5, lease_until = $6, epoch = $7, version = $8, vars_seq = $9, updated_bucket = $10, crc = $11
        WHERE id = $1 AND version = $2${fence} RETURNING id)`,
    ];
    ctes.push(...this.childWrites(params, plan, update));
    params.push(this.channel);
    let written = `$${params.length}::text`;
    if (notify) {
      // The row itself where it fits: the executing worker takes it without a read (see pg-notice.ts).
      params.push(runNotice(record, plan.varsSeq, doc, crc));
      written = `pg_notify($${params.length - 1}, $${params.length})::text`;
    }
    // Written: one row, version NULL. Not written: the row as the statement found it.
    const select = `SELECT ${writtenRow("id", written)} FROM upd
      UNION ALL SELECT ${pgRunColumns} FROM ${this.s}.runs WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM upd)`;
    const result = await this.queryUnless<StoredRunRow>(newer, `WITH ${ctes.join(",\n")} ${select}`, params, lane);
    if (!result) {
      return { current: this.cache.get(update.runId) ?? (await this.readRow(update.runId)) };
    }
    const { rows } = result;
    const found = rows[0];
    if (found === undefined) {
      this.cache.delete(update.runId);
      return { current: undefined };
    }
    if (found.version !== null) {
      const row = this.intactRow(found);
      this.remember(update.runId, row);
      return { current: row };
    }
    this.remember(update.runId, { doc, version: record.version, varsSeq: plan.varsSeq, status: record.status });
    if (record.status === "completed" || record.status === "failed" || record.status === "cancelled") this.cache.delete(update.runId);
    // The record as built, as the SQLite store answers: it shares objects with the update's `set`,
    // which are the caller's; the store keeps only `doc`, so nothing the caller does reaches it.
    return { written: { ok: true, run: record, journal: plan.written } };
  }

  /**
   * A step of the executing worker (a write fenced by its epoch, with no effects or commands) on
   * the main pool. It waits for a connection like any statement; the step that gets one writes
   * every step waiting then (up to `maxStepBatch`, one per run since a run's writes go one after
   * another) in one statement: one round trip and one commit for all of them, each run's row moving
   * only from the version its step was planned on. Under no load a step is written alone at once.
   */
  private async stepTogether(step: Omit<StepWrite, "taken" | "done" | "finish">): Promise<StepOutcome> {
    let finish!: (outcome: StepReply | Error) => void;
    const done = new Promise<StepReply | Error>((resolve) => (finish = resolve));
    const mine: StepWrite = { ...step, taken: false, done, finish };
    this.steps.add(mine);
    if (await this.stepLane(mine)) {
      try {
        const unsent = await this.sendWaitingSteps(mine);
        if (unsent) return unsent;
      } finally {
        this.stepLaneDone();
      }
    }
    const outcome = await done;
    if (outcome instanceof Error) throw outcome;
    // Its row as it is now, read with no turn of the main pool held.
    if (outcome === "not written") return { current: await this.readRow(step.runId) };
    return outcome;
  }

  /**
   * With a turn of the main pool, sends `mine` and the steps waiting beside it in one statement;
   * their outcomes come through their `done`. Returns the run's row instead when `mine` was not
   * sent because a newer row of its run came meanwhile (the statement could only fail).
   */
  private async sendWaitingSteps(mine: StepWrite): Promise<StepOutcome | undefined> {
    const turn = await this.mainTurn({ runId: mine.runId, check: () => mine.taken || mine.newer.check() }).catch((error: unknown) => {
      this.steps.delete(mine);
      throw error;
    });
    if (!turn) {
      if (mine.taken) return undefined;
      this.steps.delete(mine);
      return { current: this.cache.get(mine.runId) ?? (await this.readRow(mine.runId)) };
    }
    const batch: StepWrite[] = [];
    for (const waiting of this.steps) {
      if (batch.length >= maxStepBatch) break;
      if (waiting !== mine && waiting.newer.check()) continue;
      waiting.taken = true;
      this.steps.delete(waiting);
      batch.push(waiting);
    }
    if (!mine.taken) {
      mine.taken = true;
      this.steps.delete(mine);
      batch.push(mine);
    }
    // The others taken leave the queue now rather than when their turn would have come.
    this.dropWhere((waiting) => waiting.stale?.check() === true);
    try {
      await this.writeSteps(batch);
    } finally {
      this.mainDone();
    }
    return undefined;
  }

  /**
   * True once this step may send a statement of steps; false when another step's statement took
   * it meanwhile. At most `maxStepStatements` statements of steps are under way at once: the steps
   * that come while they are (a thousand runs' timers fire in bursts) wait and go together in the
   * next one, instead of one statement each while the pool has a connection free. A statement
   * costs the worker about as much CPU (encoding, a socket write, the reply) for one step as for
   * twenty: at 1,000 concurrent runs two cut the statements of steps from ~4,900 to ~2,100 and
   * raised steps per second by ~7% against no bound (bench/profile-concurrency.ts on
   * PostgreSQL, three interleaved rounds; four did no better). A lone step, or one run's steps one
   * after another, never waits here.
   */
  private stepLane(step: StepWrite): Promise<boolean> {
    if (this.stepStatements < maxStepStatements) {
      this.stepStatements += 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      this.stepLaneQueue.push({ step, resolve });
      void step.done.then(() => resolve(false));
    });
  }

  private stepLaneDone(): void {
    for (;;) {
      const next = this.stepLaneQueue.shift();
      if (!next) {
        this.stepStatements -= 1;
        return;
      }
      // Written by another step's statement: its promise is settled by `done`.
      if (next.step.taken) continue;
      next.resolve(true);
      return;
    }
  }

  private async writeSteps(batch: StepWrite[]): Promise<void> {
    let written: Set<string>;
    try {
      written = await this.sendSteps(batch);
    } catch (error) {
      if (batch.length === 1) {
        batch[0].finish(error as Error);
        return;
      }
      // A failed statement (a deadlock with a worker that lost its lease) fails no step: each is written alone.
      for (const step of batch) {
        await this.writeSteps([step]).catch((e: unknown) => step.finish(e as Error));
      }
      return;
    }
    for (const step of batch) {
      // Not written (the run moved on, or this worker was fenced off): the rare case, so the
      // statement returns only ids; `stepTogether` reads the row once this turn is given back.
      if (!written.has(step.runId)) {
        step.finish("not written");
        continue;
      }
      const { record, doc, plan } = step;
      this.remember(step.runId, { doc, version: record.version, varsSeq: plan.varsSeq, status: record.status });
      if (record.status === "completed" || record.status === "failed" || record.status === "cancelled") this.cache.delete(step.runId);
      // The record as built, as in `tryUpdate`.
      step.finish({ written: { ok: true, run: record, journal: plan.written } });
    }
  }

  /**
   * Sends the steps' statement (this step holds a turn of the main pool: it goes straight to it);
   * the ids of the runs written. A step written alone (a worker's usual case, and every step of
   * a run on its own) takes its values as parameters; several go as JSON record sets, one
   * statement whatever their number.
   */
  private async sendSteps(batch: StepWrite[]): Promise<Set<string>> {
    if (batch.length === 1) {
      const single = this.singleStep(batch[0]);
      if (single) return new Set((await this.query<{ id: string }>(single.sql, single.params, this.pool)).rows.map((row) => row.id));
    }
    batch.sort((a, b) => (a.runId < b.runId ? -1 : 1));
    const runs = batch.map(({ record, doc, crc, prev, fence, plan }) => ({
      id: record.id,
      prev,
      fence,
      doc,
      status: record.status,
      updated_at: record.updatedAt,
      lease_until: record.lease?.until ?? null,
      epoch: record.epoch,
      version: record.version,
      vars_seq: plan.varsSeq,
      updated_bucket: updatedBucket(record.updatedAt),
      crc,
    }));
    const { journal, messages } = recordSets(batch.map(({ record, plan }) => ({ runId: record.id, plan })));
    // The ids again as an array: the runs are found by their key, never by a scan of the table.
    const ids = batch.map((step) => step.runId);
    const { rows } = await this.query<{ id: string }>(this.stepsSql, [JSON.stringify(runs), journal, messages, ids], this.pool);
    return new Set(rows.map((row) => row.id));
  }

  /**
   * A step written alone: the run row, its journal rows and messages as parameters of their own,
   * with no JSON to encode here nor to parse in the server (an eighth less time a step than the
   * record sets, measured alone). One statement for each number of rows and messages up to
   * `maxSingleRows`; undefined beyond it (a step that writes more goes as a record set).
   */
  private singleStep(step: StepWrite): { sql: string; params: unknown[] } | undefined {
    const { record, plan } = step;
    const messages = plan.messages?.bodies.length ?? 0;
    if (plan.rows.length > maxSingleRows || messages > maxSingleRows) return undefined;
    const params: unknown[] = [record.id, step.prev, step.fence, ...runRowValues(record, plan.varsSeq, step.doc, step.crc)];
    for (const row of plan.rows) {
      params.push(row.seq, row.type, row.at, row.call_seq, row.data, row.snap_seq ?? null, row.snap_step ?? null, row.msg_count ?? null, row.chain ?? null);
      params.push(row.checksum ?? null, row.schema_version ?? null, row.snap_at ?? null, row.vars ?? null, row.vars_seq ?? null, row.crc);
    }
    if (plan.messages) {
      const { first, bodies, crcs } = plan.messages;
      for (let i = 0; i < bodies.length; i++) params.push(first + i, bodies[i], crcs[i]);
    }
    return { sql: this.singleStepSql(plan.rows.length, messages), params };
  }

  private singleStepSql(rows: number, messages: number): string {
    const key = rows * (maxSingleRows + 1) + messages;
    let sql = this.singleStepSqlText.get(key);
    if (sql) return sql;
    const s = this.s;
    let n = 12;
    const typed = (...types: string[]) => `(${types.map((type) => `$${++n}::${type}`).join(", ")})`;
    const journalTypes = ["int", "text", "bigint", "int", "text", "int", "int", "int", "text", "text", "int", "bigint", "text", "int", "bigint"];
    const ctes = [
      `upd AS (UPDATE ${s}.runs SET doc = $4, status = $5, updated_at = $6, lease_until = $7, epoch = $8, version = $9, vars_seq = $10, updated_bucket = $11, crc = $12
        WHERE id = $1 AND version = $2 AND epoch = $3 RETURNING id)`,
    ];
    if (rows > 0) {
      const values = Array.from({ length: rows }, () => typed(...journalTypes)).join(",\n          ");
      ctes.push(`j AS (INSERT INTO ${s}.journal (run_id, seq, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_seq, crc)
        SELECT upd.id, y.* FROM upd, (VALUES ${values}) AS y)`);
    }
    if (messages > 0) {
      const values = Array.from({ length: messages }, () => typed("int", "text", "bigint")).join(", ");
      ctes.push(`m AS (INSERT INTO ${s}.messages (run_id, idx, body, crc) SELECT upd.id, y.* FROM upd, (VALUES ${values}) AS y)`);
    }
    sql = `WITH ${ctes.join(",\n      ")}\n      SELECT id FROM upd`;
    this.singleStepSqlText.set(key, sql);
    return sql;
  }

  /** The statement of `writeSteps`, built once: its text is the key of its prepared statement, looked up at every step. */
  private get stepsSql(): string {
    const s = this.s;
    return (this.stepsSqlText ??= `WITH x AS (SELECT * FROM json_to_recordset($1::json) AS x(id text, prev int, fence int, doc text, status text, updated_at bigint, lease_until bigint, epoch int, version int, vars_seq int, updated_bucket bigint, crc bigint)),
      upd AS (UPDATE ${s}.runs AS r SET doc = x.doc, status = x.status, updated_at = x.updated_at, lease_until = x.lease_until, epoch = x.epoch, version = x.version, vars_seq = x.vars_seq, updated_bucket = x.updated_bucket, crc = x.crc
        FROM x WHERE r.id = ANY($4::text[]) AND r.id = x.id AND r.version = x.prev AND r.epoch = x.fence RETURNING r.id),
      ${childRecordSets(s)}
      SELECT id FROM upd`);
  }

  /** Numbers the entries on from the run's last; the snapshot goes on the last of them. */
  private writePlan(record: RunRecord, varsSeq: number, entries: JournalInput[], snapshot: SnapshotWrite | undefined): WritePlan {
    const rows: JournalRow[] = [];
    const written: JournalEntry[] = [];
    let nextVarsSeq = varsSeq;
    let messages: WritePlan["messages"];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      const seq = ++record.journalSeq;
      const row: JournalRow = { seq, type: entry.type, at: entry.at, call_seq: entry.callSeq ?? null, data: JSON.stringify(entry.data), crc: 0 };
      if (snapshot && i === entries.length - 1) {
        const { head } = snapshot;
        if (snapshot.varsJson !== undefined) nextVarsSeq = seq;
        record.snapshotSeq += 1;
        record.snapshotAt = head.at;
        Object.assign(row, {
          snap_seq: record.snapshotSeq,
          snap_step: head.step,
          msg_count: head.messageCount,
          chain: head.chain,
          checksum: head.checksum,
          schema_version: head.schemaVersion,
          snap_at: head.at,
          vars: snapshot.varsJson ?? null,
          vars_seq: nextVarsSeq === seq ? null : nextVarsSeq,
        });
        if (snapshot.appendMessages.length > 0) {
          const first = head.messageCount - snapshot.appendMessages.length;
          messages = { first, bodies: snapshot.appendMessages, crcs: snapshot.appendMessages.map((body, n) => messageChecksum(record.id, first + n, body)) };
        }
      }
      row.crc = pgRowChecksum(record.id, row);
      rows.push(row);
      written.push({ ...entry, runId: record.id, seq });
    }
    return { record, varsSeq: nextVarsSeq, rows, written, messages };
  }

  /** The inserts that go with a run's row, each only when the row was written (`upd` returned it). */
  private childWrites(params: unknown[], plan: WritePlan, update: Partial<RunUpdate>): string[] {
    const ctes: string[] = [];
    const s = this.s;
    const p = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    if (plan.rows.length > 0) {
      ctes.push(`j AS (INSERT INTO ${s}.journal (run_id, seq, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_seq, crc)
        SELECT upd.id, x.seq, x.type, x.at, x.call_seq, x.data, x.snap_seq, x.snap_step, x.msg_count, x.chain, x.checksum, x.schema_version, x.snap_at, x.vars, x.vars_seq, x.crc
        FROM upd, json_to_recordset(${p(JSON.stringify(plan.rows))}::json) AS x(seq int, type text, at bigint, call_seq int, data text, snap_seq int, snap_step int,
          msg_count int, chain text, checksum text, schema_version int, snap_at bigint, vars text, vars_seq int, crc bigint))`);
    }
    if (plan.messages) {
      ctes.push(`m AS (INSERT INTO ${s}.messages (run_id, idx, body, crc)
        SELECT upd.id, ${p(plan.messages.first)}::int + (m.n - 1)::int, m.body, m.crc FROM upd, unnest(${p(plan.messages.bodies)}::text[], ${p(plan.messages.crcs)}::bigint[]) WITH ORDINALITY AS m(body, crc, n))`);
    }
    if (update.effects?.length) {
      ctes.push(`e AS (INSERT INTO ${s}.effects (run_id, call_seq, tool, input, result, state, attempts, error, updated_at)
        SELECT upd.id, x.call_seq, x.tool, x.input, x.result, x.state, x.attempts, x.error, x.updated_at
        FROM upd, json_to_recordset(${p(JSON.stringify(update.effects.map(effectRow)))}::json) AS x(call_seq int, tool text, input text, result text, state text, attempts int, error text, updated_at bigint)
        ON CONFLICT (run_id, call_seq) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at)`);
    }
    if (update.insertCommand) {
      const c = update.insertCommand;
      ctes.push(`c AS (INSERT INTO ${s}.commands (id, run_id, type, actor, reason, payload, created_at, applied_at, outcome)
        SELECT ${p(c.id)}, ${p(c.runId)}, ${p(c.type)}, ${p(c.actor)}, ${p(c.reason)}, ${p(JSON.stringify(c.payload))}, ${p(c.createdAt)}::bigint, ${p(c.appliedAt)}::bigint, ${p(c.outcome)} FROM upd)`);
    }
    const settle = update.settleCommands;
    if (settle && Object.keys(settle.outcomes).length) {
      const outcomes = Object.entries(settle.outcomes).map(([type, outcome]) => ({ type, outcome }));
      ctes.push(`a AS (UPDATE ${s}.commands AS c SET applied_at = ${p(settle.at)}::bigint, outcome = x.outcome
        FROM upd, json_to_recordset(${p(JSON.stringify(outcomes))}::json) AS x(type text, outcome text)
        WHERE c.run_id = upd.id AND c.type = x.type AND c.applied_at IS NULL)`);
    }
    return ctes;
  }

  async readJournal(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<JournalEntry[]> {
    const afterSeq = Math.max(0, Math.floor(options.afterSeq ?? 0));
    const { rows } = await this.query<StoredJournalRow>(
      `SELECT ${pgChecksummedColumns} FROM ${this.s}.journal WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [runId, afterSeq, options.limit ?? 1000],
    );
    const damaged = rows.find((row) => !pgRowIntact(runId, row));
    if (damaged) throw new StoreCorruptError(`the PostgreSQL schema ${this.schema}`, `run ${runId}: journal entry ${damaged.seq} ${damaged.crc === null ? "has no checksum" : "fails its checksum"}`, { runId, seq: damaged.seq });
    return rows.map((row) => ({
      runId,
      seq: row.seq,
      type: row.type as JournalType,
      at: row.at,
      ...(row.call_seq === null ? {} : { callSeq: row.call_seq }),
      data: JSON.parse(row.data),
    }));
  }

  async loadState(runId: string, options: { atStep?: number } = {}): Promise<StoredState> {
    const columns = `${pgChecksummedColumns}, vars`;
    const params: unknown[] = [runId];
    let atStep = "";
    if (options.atStep !== undefined) {
      params.push(options.atStep);
      atStep = " AND snap_step <= $2";
    }
    // A short history's messages come with the snapshot's row (a run starting or early on: one
    // statement, not two); a longer one's are read as rows of their own, cheaper to take apart.
    const { rows } = await this.query<SnapshotRow & { messages: string | null }>(
      `SELECT ${columns}, CASE WHEN msg_count <= ${inlineMessages} THEN
         (SELECT coalesce(json_agg(json_build_array(m.idx, m.body, m.crc) ORDER BY m.idx), '[]') FROM ${this.s}.messages m WHERE m.run_id = $1 AND m.idx < j.msg_count)::text END AS messages
       FROM ${this.s}.journal j WHERE run_id = $1 AND snap_seq IS NOT NULL${atStep} ORDER BY seq DESC LIMIT 1`,
      params,
    );
    const row = rows[0];
    if (!row) {
      if (!(await this.getRun(runId))) throw new RunNotFoundError(runId);
      throw new SnapshotCorruptError(runId, options.atStep === undefined ? "no snapshot row" : `no snapshot at or before step ${options.atStep}`);
    }
    if (!pgRowIntact(runId, row)) throw new SnapshotCorruptError(runId, `journal entry ${row.seq}, which carries snapshot ${row.snap_seq}, fails its checksum`);
    let vars = { vars: row.vars, snap_seq: row.snap_seq as number | null };
    if (row.vars_seq !== null) {
      const found = await this.query<StoredJournalRow & { vars: string | null }>(`SELECT ${columns} FROM ${this.s}.journal WHERE run_id = $1 AND seq = $2`, [runId, row.vars_seq]);
      const varsRow = found.rows[0];
      if (varsRow && !pgRowIntact(runId, varsRow)) throw new SnapshotCorruptError(runId, `journal entry ${varsRow.seq}, which holds the vars of snapshot ${row.snap_seq}, fails its checksum`);
      vars = { vars: varsRow?.vars ?? null, snap_seq: varsRow?.snap_seq ?? null };
    }
    if (vars.vars === null || vars.snap_seq === null) throw new SnapshotCorruptError(runId, `the vars of snapshot ${row.snap_seq} are missing`);
    const messages =
      row.messages !== null
        ? (JSON.parse(row.messages) as [number, string, number | null][]).map(([idx, body, crc]) => ({ idx, body, crc }))
        : (await this.query<StoredMessageRow>(`SELECT idx, body, crc FROM ${this.s}.messages WHERE run_id = $1 AND idx < $2 ORDER BY idx`, [runId, row.msg_count])).rows;
    if (messages.length !== row.msg_count) {
      throw new SnapshotCorruptError(runId, `snapshot ${row.snap_seq} holds ${row.msg_count} messages but ${messages.length} are stored`);
    }
    const damagedMessage = messages.find((m) => !pgMessageIntact(runId, m));
    if (damagedMessage) throw new SnapshotCorruptError(runId, `message ${damagedMessage.idx} before snapshot ${row.snap_seq} fails its checksum`);
    return {
      head: {
        seq: row.snap_seq,
        step: row.snap_step,
        messageCount: row.msg_count,
        chain: row.chain,
        checksum: row.checksum,
        schemaVersion: row.schema_version,
        at: row.snap_at ?? row.at,
        varsSeq: vars.snap_seq,
        entrySeq: row.seq,
      },
      varsJson: vars.vars,
      messages: messages.map((m) => m.body),
    };
  }

  async readMessages(runId: string, indexes: readonly number[]): Promise<Map<number, string>> {
    const wanted = indexes.filter((i) => Number.isInteger(i) && i >= 0 && i < 2 ** 31);
    const found = new Map<number, string>();
    if (wanted.length === 0) return found;
    const { rows } = await this.query<StoredMessageRow>(`SELECT idx, body, crc FROM ${this.s}.messages WHERE run_id = $1 AND idx = ANY($2::int[])`, [runId, wanted]);
    for (const row of rows) {
      if (!pgMessageIntact(runId, row)) throw new SnapshotCorruptError(runId, `message ${row.idx} fails its checksum`);
      found.set(row.idx, row.body);
    }
    return found;
  }

  async insertCommand(command: CommandRecord): Promise<void> {
    await this.query(
      `INSERT INTO ${this.s}.commands (id, run_id, type, actor, reason, payload, created_at, applied_at, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [command.id, command.runId, command.type, command.actor, command.reason, JSON.stringify(command.payload), command.createdAt, command.appliedAt, command.outcome],
    );
  }

  async listCommands(runId: string): Promise<CommandRecord[]> {
    // A run that is stopping settles its commands on the way: read them on the control lane.
    const { rows } = await this.query<CommandRow>(`SELECT * FROM ${this.s}.commands WHERE run_id = $1 ORDER BY created_at, n`, [runId], this.stopping(runId) ? this.controlPool : undefined);
    return rows.map(commandFromRow);
  }

  /** Whether this process last saw the run pausing, cancelling or halted. */
  private stopping(runId: string): boolean {
    return stopping(this.cache.get(runId)?.status);
  }

  async listEffects(runId: string): Promise<EffectRecord[]> {
    const { rows } = await this.query<EffectRow>(`SELECT * FROM ${this.s}.effects WHERE run_id = $1 ORDER BY call_seq`, [runId]);
    return rows.map((row) => effectFromRow(runId, row));
  }

  async listHalts(): Promise<HaltRecord[]> {
    return (await this.query<HaltRecord>(`SELECT scope, actor, reason, at FROM ${this.s}.halts ORDER BY at`)).rows;
  }

  async setHalt(halt: HaltRecord): Promise<void> {
    await this.query(
      `INSERT INTO ${this.s}.halts (scope, actor, reason, at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (scope) DO UPDATE SET actor = excluded.actor, reason = excluded.reason, at = excluded.at`,
      [halt.scope, halt.actor, halt.reason, halt.at],
    );
    await this.query("SELECT pg_notify($1, $2)", [this.channel, "*"]);
  }

  async clearHalt(scope: string): Promise<boolean> {
    return ((await this.query(`DELETE FROM ${this.s}.halts WHERE scope = $1`, [scope])).rowCount ?? 0) > 0;
  }

  async findClaimable(now: number, limit: number): Promise<RunRecord[]> {
    const { rows } = await this.query<StoredRunRow>(
      `SELECT ${pgRunColumns} FROM ${this.s}.runs
       WHERE ${claimable}
       ORDER BY updated_at, id LIMIT $2`,
      [now, limit],
    );
    // A damaged row is passed over, not claimed (its record cannot be trusted) nor thrown (a worker
    // would claim no other run): it stays as it is, refused when read and named by `tether verify`.
    return intactRecords(rows, (stored) => {
      const row = this.intactRow(stored);
      this.remember(stored.id, row);
      return JSON.parse(row.doc) as RunRecord;
    });
  }

  async runStorage(runId: string): Promise<RunStorage | undefined> {
    const { rows } = await this.query<{ exists: boolean } & SizeRow>(
      `SELECT EXISTS (SELECT 1 FROM ${this.s}.runs WHERE id = $1) AS exists, ${this.sizeColumns("$1")}`,
      [runId],
    );
    const row = rows[0];
    return row?.exists ? storageOf(row) : undefined;
  }

  /** The size of run `id` (an SQL expression) as columns. */
  private sizeColumns(id: string): string {
    const s = this.s;
    return `(SELECT COUNT(*) FROM ${s}.journal WHERE run_id = ${id}) AS journal_entries,
      (SELECT COALESCE(SUM(octet_length(data) + COALESCE(octet_length(vars), 0) + COALESCE(octet_length(checksum), 0)), 0) FROM ${s}.journal WHERE run_id = ${id}) AS journal_bytes,
      (SELECT COUNT(*) FROM ${s}.messages WHERE run_id = ${id}) AS messages,
      (SELECT COALESCE(SUM(octet_length(body)), 0) FROM ${s}.messages WHERE run_id = ${id}) AS message_bytes,
      (SELECT COUNT(*) FROM ${s}.effects WHERE run_id = ${id}) AS effects,
      (SELECT COALESCE(SUM(octet_length(input) + octet_length(result) + COALESCE(octet_length(error), 0)), 0) FROM ${s}.effects WHERE run_id = ${id}) AS effect_bytes,
      (SELECT COUNT(*) FROM ${s}.commands WHERE run_id = ${id}) AS commands,
      (SELECT COALESCE(SUM(octet_length(payload) + COALESCE(octet_length(reason), 0)), 0) FROM ${s}.commands WHERE run_id = ${id}) AS command_bytes`;
  }

  async prune(options: PruneOptions): Promise<PruneReport> {
    const report: PruneReport = { runs: 0, journalEntries: 0, messages: 0, bytes: 0, batches: 0 };
    const batchSize = Math.max(1, Math.floor(options.batchSize ?? 200));
    const s = this.s;
    let afterId = "";
    for (;;) {
      // The candidates' rows are read and checked first: a damaged one (its status or time may be
      // the damage) is never pruned, and stays for `tether verify` to name.
      const candidates = await this.query<StoredRunRow>(
        `SELECT ${pgRunColumns} FROM ${s}.runs WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < $1 AND id > $2 ORDER BY id LIMIT $3`,
        [options.before, afterId, batchSize],
      );
      if (candidates.rows.length === 0) return report;
      afterId = candidates.rows[candidates.rows.length - 1].id;
      const ids = candidates.rows.filter((row) => pgRunIntact(row)).map((row) => row.id);
      if (ids.length === 0) continue;
      // Then one statement: the runs are locked (SKIP LOCKED: a run being written is left for the
      // next prune), measured, and with dryRun only measured.
      const picked = `SELECT id, octet_length(doc) AS doc_bytes FROM ${s}.runs
        WHERE id = ANY($2::text[]) AND status IN ('completed', 'failed', 'cancelled') AND updated_at < $1 FOR UPDATE SKIP LOCKED`;
      const sized = `SELECT p.id, p.doc_bytes, ${this.sizeColumns("p.id")} FROM picked p`;
      const sql = options.dryRun
        ? `WITH picked AS (${picked}) ${sized}`
        : `WITH picked AS (${picked}), sized AS (${sized}),
            j AS (DELETE FROM ${s}.journal WHERE run_id IN (SELECT id FROM picked)),
            m AS (DELETE FROM ${s}.messages WHERE run_id IN (SELECT id FROM picked)),
            e AS (DELETE FROM ${s}.effects WHERE run_id IN (SELECT id FROM picked)),
            c AS (DELETE FROM ${s}.commands WHERE run_id IN (SELECT id FROM picked)),
            r AS (DELETE FROM ${s}.runs WHERE id IN (SELECT id FROM picked) AND status IN ('completed', 'failed', 'cancelled'))
          SELECT * FROM sized`;
      const { rows } = await this.query<{ id: string; doc_bytes: number } & SizeRow>(sql, [options.before, ids]);
      if (rows.length > 0) report.batches += 1;
      for (const row of rows) {
        const size = storageOf(row);
        report.runs += 1;
        report.journalEntries += size.journalEntries;
        report.messages += size.messages;
        report.bytes += size.bytes + row.doc_bytes;
        this.cache.delete(row.id);
      }
    }
  }

  async claimRuns(now: number, limit: number, plan: (run: RunRecord, halts: readonly HaltRecord[]) => Omit<RunUpdate, "runId"> | undefined): Promise<UpdateResult[]> {
    // First one statement that reads the halts only when there is a run to claim: once a worker's
    // runs are under way its looks (one as each run ends) find none, and cost no transaction.
    const found = await this.query<{ halts: string }>(
      `SELECT coalesce((SELECT json_agg(json_build_object('scope', scope, 'actor', actor, 'reason', reason, 'at', at) ORDER BY at) FROM ${this.s}.halts), '[]')::text AS halts
       WHERE EXISTS (SELECT 1 FROM ${this.s}.runs WHERE ${claimable})`,
      [now],
    );
    if (found.rows.length === 0) return [];
    const halts = JSON.parse(found.rows[0].halts) as HaltRecord[];
    const client = await this.pool.connect().catch((error: unknown) => {
      throw this.closed ? this.closedError() : storeError("PostgreSQL store", error);
    });
    const results: UpdateResult[] = [];
    try {
      await client.query("BEGIN");
      const { rows } = await this.query<StoredRunRow>(
        `SELECT ${pgRunColumns} FROM ${this.s}.runs
         WHERE ${claimable}
         ORDER BY updated_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [now, limit],
        client,
      );
      for (const row of rows) {
        // A damaged row is passed over, as in `findClaimable`.
        if (!pgRunIntact(row)) continue;
        const current = JSON.parse(row.doc) as RunRecord;
        const update = plan(current, halts);
        if (!update || !expectationsHold(current, update.expect)) continue;
        const { written } = await this.tryUpdate({ ...update, runId: row.id }, current, row.vars_seq, client);
        if (written) results.push(written);
      }
      await client.query("COMMIT");
      return results;
    } catch (error) {
      // Nothing was claimed: forget what the rolled-back writes put in the cache.
      for (const result of results) this.cache.delete(result.run.id);
      await client.query("ROLLBACK").catch(() => undefined);
      throw storeError("PostgreSQL store: claiming runs", error);
    } finally {
      client.release();
    }
  }

  async saveToken(token: ApiTokenRecord): Promise<void> {
    await this.query(`INSERT INTO ${this.s}.tokens (id, name, role, hash, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
      token.id,
      token.name,
      token.role,
      token.hash,
      token.createdAt,
      token.revokedAt,
    ]);
  }

  async findTokenByHash(hash: string): Promise<ApiTokenRecord | undefined> {
    const { rows } = await this.query<TokenRow>(`SELECT * FROM ${this.s}.tokens WHERE hash = $1`, [hash]);
    return rows[0] ? tokenFromRow(rows[0]) : undefined;
  }

  async listTokens(): Promise<ApiTokenRecord[]> {
    return (await this.query<TokenRow>(`SELECT * FROM ${this.s}.tokens ORDER BY created_at`)).rows.map(tokenFromRow);
  }

  async revokeToken(id: string, at: number): Promise<ApiTokenRecord | undefined> {
    // COALESCE keeps the first revocation's time; the row comes back either way.
    const { rows } = await this.query<TokenRow>(`UPDATE ${this.s}.tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *`, [id, at]);
    return rows[0] ? tokenFromRow(rows[0]) : undefined;
  }

  async runVersions(runIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.query<{ id: string; version: number }>(`SELECT id, version FROM ${this.s}.runs WHERE id = ANY($1::text[])`, [[...runIds]]);
    return new Map(rows.map((row) => [row.id, row.version]));
  }

  /**
   * Calls `onChange` with a run's id whenever a write not fenced by its executing worker lands
   * (a control command, a claim), from any process, and with the run's new record when the
   * notification carries it and this process works on the run (see `notified`); `"*"` when a
   * halt is set. One LISTEN connection per store, shared by every watcher. Returns the function
   * that stops it.
   */
  async watchRuns(onChange: (runId: string, record?: RunRecord) => void): Promise<() => void> {
    this.watchers.add(onChange);
    await (this.listening ??= this.listen());
    return () => this.watchers.delete(onChange);
  }

  /**
   * One LISTEN connection for every watcher of this store. When it drops (the server restarted,
   * a network cut), it connects again after a second and reports `"*"`: whatever was notified in
   * between was missed.
   */
  private async listen(): Promise<void> {
    await this.ready;
    const client = new pg.Client({ connectionString: this.options.connectionString, application_name: "tether" });
    client.on("notification", (message) => {
      if (message.channel === this.channel) this.notified(message.payload ?? "");
    });
    let dropped = false;
    const reconnect = () => {
      if (dropped || this.closed) return;
      dropped = true;
      this.listenClient = undefined;
      client.end().catch(() => undefined);
      const timer = setTimeout(() => {
        this.listening = this.listen().then(
          () => this.changed("*"),
          () => reconnect(),
        );
      }, 1000);
      timer.unref?.();
    };
    client.on("error", reconnect);
    client.on("end", reconnect);
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdentifier(this.channel)}`);
    } catch (error) {
      reconnect();
      throw storeError("PostgreSQL store: cannot LISTEN for changes", error);
    }
    this.listenClient = client;
  }

  /**
   * A notification. The row it carries, of a run this process works on (one it has cached), is
   * remembered (a queued step write of the run is dropped at once) and handed on with the id;
   * the rows of other runs are not even parsed. It is handed on even when the cache holds that
   * version already: what this process read for someone else (the API) its executor has not seen.
   */
  private notified(payload: string): void {
    const notice = readRunNotice(payload);
    const row = this.cache.has(notice.runId) ? notice.row() : undefined;
    if (row) {
      this.remember(notice.runId, { doc: row.doc, version: row.record.version, varsSeq: row.varsSeq, status: row.record.status });
      this.dropStale(notice.runId);
    }
    this.changed(notice.runId, row?.record);
  }

  private changed(runId: string, record?: RunRecord): void {
    for (const watcher of this.watchers) {
      try {
        watcher(runId, record);
      } catch {
        // A watcher's failure is its own.
      }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watchers.clear();
    await this.listening?.catch(() => undefined);
    await this.listenClient?.end().catch(() => undefined);
    await this.ready.catch(() => undefined);
    await this.pool.end();
    await this.controlPool.end();
  }

  /** Drops the store's schema and everything in it (tests and `tether demo` on a scratch schema). */
  async dropSchema(): Promise<void> {
    await this.query(`DROP SCHEMA IF EXISTS ${this.s} CASCADE`);
  }
}

/**
 * Steps written in one statement at most. A statement's reply finishes all its steps in one turn
 * of the loop (each parses its record and its run goes on to its next call), so its size bounds
 * the longest turns: at 1,000 concurrent runs, 32 instead of 64 cut the event-loop delay p99 of
 * `bench/profile-concurrency.ts` on PostgreSQL from ~95 to ~62 ms (medians of six interleaved
 * rounds) at the same steps per second; 16 cut it to ~48 ms for ~7% of the steps per second.
 */
const maxStepBatch = 32;
/** Statements of steps one store has under way at once (see `stepLane`). */
const maxStepStatements = 2;
/** At most this many creations in one statement (a few kilobytes each). */
const maxCreateBatch = 100;

/**
 * The journal entries ($2) and messages ($3) of several runs as JSON record sets (`recordSets`),
 * inserted for the runs the statement's `upd` wrote: the steps' statement and the creations'.
 */
function childRecordSets(s: string): string {
  return `j AS (INSERT INTO ${s}.journal (run_id, seq, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_seq, crc)
        SELECT y.run_id, y.seq, y.type, y.at, y.call_seq, y.data, y.snap_seq, y.snap_step, y.msg_count, y.chain, y.checksum, y.schema_version, y.snap_at, y.vars, y.vars_seq, y.crc
        FROM json_to_recordset($2::json) AS y(run_id text, seq int, type text, at bigint, call_seq int, data text, snap_seq int, snap_step int,
          msg_count int, chain text, checksum text, schema_version int, snap_at bigint, vars text, vars_seq int, crc bigint)
        WHERE y.run_id IN (SELECT id FROM upd)),
      m AS (INSERT INTO ${s}.messages (run_id, idx, body, crc)
        SELECT y.run_id, y.idx, y.body, y.crc FROM json_to_recordset($3::json) AS y(run_id text, idx int, body text, crc bigint) WHERE y.run_id IN (SELECT id FROM upd))`;
}

/** The journal rows and messages of the runs' plans, as the JSON record sets of `childRecordSets`. */
function recordSets(writes: readonly { runId: string; plan: WritePlan }[]): { journal: string; messages: string } {
  const journal = writes.flatMap(({ runId, plan }) => plan.rows.map((row) => ({ run_id: runId, ...row })));
  const messages = writes.flatMap(({ runId, plan }) => (plan.messages ? plan.messages.bodies.map((body, i) => ({ run_id: runId, idx: plan.messages!.first + i, body, crc: plan.messages!.crcs[i] })) : []));
  return { journal: JSON.stringify(journal), messages: JSON.stringify(messages) };
}

/** The most messages `loadState` reads with the snapshot's row, as one JSON value. */
const inlineMessages = 64;
/** The runs a worker may take (`findClaimable`), the time now as $1: queued, or active with no live lease. */
const claimable = `status = 'queued' OR (status IN ('running', 'pausing', 'cancelling') AND (lease_until IS NULL OR lease_until < $1))`;
/** The most journal rows (and messages) a step written alone takes as parameters of their own. */
const maxSingleRows = 4;

type StepOutcome = { written: UpdateResult; current?: undefined } | { written?: undefined; current: CachedRun | undefined };
/** What `writeSteps` hands a step: its outcome, or that it was not written (its row is read after). */
type StepReply = StepOutcome | "not written";

interface StepWrite {
  runId: string;
  /** The version the step was planned on, and the epoch that fences it. */
  prev: number;
  fence: number;
  record: RunRecord;
  /** The record as written, and the row's checksum. */
  doc: string;
  crc: number;
  plan: WritePlan;
  newer: Stale;
  /** In a statement (its own or another step's). */
  taken: boolean;
  done: Promise<StepReply | Error>;
  finish(outcome: StepReply | Error): void;
}

interface Creation {
  run: NewRun;
  plan: WritePlan;
  doc: string;
  crc: number;
  /** Written by another creation's statement (or its own): it needs no turn of its own. */
  taken: boolean;
  /** The scope of the halt that refused it, null once written, or the error. */
  done: Promise<string | null | Error>;
  finish(outcome: string | null | Error): void;
}

interface Renewal {
  update: RunUpdate;
  resolve(result: UpdateResult): void;
  reject(error: unknown): void;
}

/** An update that only extends the lease of the worker that holds the run (fenced by its epoch). */
function renewalOnly(update: RunUpdate): boolean {
  const { expect } = update;
  return (
    update.renewLease !== undefined &&
    expect?.epoch !== undefined &&
    expect.status === undefined &&
    expect.version === undefined &&
    expect.leaseFree === undefined &&
    (update.set === undefined || Object.keys(update.set).length === 0) &&
    !update.claim &&
    !update.journal?.length &&
    !update.snapshot &&
    !update.effects?.length &&
    !update.insertCommand &&
    !update.settleCommands
  );
}

/** When a queued statement of run `runId` has become pointless. */
interface Stale {
  runId: string;
  check(): boolean;
}

interface SizeRow {
  journal_entries: number;
  journal_bytes: number;
  messages: number;
  message_bytes: number;
  effects: number;
  effect_bytes: number;
  commands: number;
  command_bytes: number;
}

function storageOf(row: SizeRow): RunStorage {
  return {
    journalEntries: Number(row.journal_entries),
    messages: Number(row.messages),
    effects: Number(row.effects),
    commands: Number(row.commands),
    bytes: Number(row.journal_bytes) + Number(row.message_bytes) + Number(row.effect_bytes) + Number(row.command_bytes),
  };
}

interface WritePlan {
  record: RunRecord;
  varsSeq: number;
  rows: JournalRow[];
  written: JournalEntry[];
  /** The messages a snapshot appended, from index `first`, each with its checksum. */
  messages: { first: number; bodies: string[]; crcs: number[] } | undefined;
}

interface JournalRow {
  seq: number;
  type: JournalType;
  at: number;
  call_seq: number | null;
  data: string;
  crc: number;
  snap_seq?: number;
  snap_step?: number;
  msg_count?: number;
  chain?: string;
  checksum?: string;
  schema_version?: number;
  snap_at?: number;
  vars?: string | null;
  vars_seq?: number | null;
}

/** A run row as read back, with the checksum it was written with. */
type StoredRunRow = PgRunRow & { crc: number | null };

/**
 * The columns of `pgRunColumns` for a row a statement wrote: version NULL (how the caller tells it
 * from a row found moved), `id` and `doc` as given, the rest NULL.
 */
function writtenRow(id: string, doc: string): string {
  const values: Record<string, string> = { id, doc, agent: "NULL::text", status: "NULL::text", version: "NULL::int", vars_seq: "NULL::int", epoch: "NULL::int" };
  return pgRunColumns
    .split(", ")
    .map((column) => `${values[column] ?? "NULL::bigint"} AS ${column}`)
    .join(", ");
}

/** A journal row as read back, with the checksum it was written with. */
type StoredJournalRow = PgChecksummedRow & { crc: number | null };

/** A message row as read back. */
interface StoredMessageRow {
  idx: number;
  body: string;
  crc: number | null;
}

interface SnapshotRow {
  seq: number;
  type: string;
  at: number;
  call_seq: number | null;
  data: string;
  crc: number | null;
  snap_seq: number;
  snap_step: number;
  msg_count: number;
  chain: string;
  checksum: string;
  schema_version: number;
  snap_at: number | null;
  vars: string | null;
  vars_seq: number | null;
}

/** A run row's values as a write sets them: doc, status, updated_at, lease_until, epoch, version, vars_seq, updated_bucket, crc. */
function runRowValues(record: RunRecord, varsSeq: number, doc: string, crc: number): unknown[] {
  return [doc, record.status, record.updatedAt, record.lease?.until ?? null, record.epoch, record.version, varsSeq, updatedBucket(record.updatedAt), crc];
}

const statementNames = new Map<string, string>();

/** A stable name per statement text (PostgreSQL keeps a prepared statement per name and connection). */
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (!name) {
    name = `tether_${createHash("sha1").update(sql).digest("hex").slice(0, 20)}`;
    statementNames.set(sql, name);
  }
  return name;
}

function effectRow(effect: EffectWrite) {
  return {
    call_seq: effect.callSeq,
    tool: effect.tool,
    input: JSON.stringify(effect.input),
    result: JSON.stringify(effect.result),
    state: effect.state,
    attempts: effect.attempts,
    error: effect.error,
    updated_at: effect.updatedAt,
  };
}

function storeError(context: string, error: unknown): TetherError {
  if (TetherError.isInstance(error)) return error;
  return new TetherError("store_error", `${context}: ${(error as Error).message}`, undefined, { cause: error });
}

/** A connection string without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable connection string)";
  }
}

/** The WHERE clause of a listing of runs (empty for no filter) and its parameters, numbered from $1. */
function runsWhere(filter: RunFilter): { where: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.status?.length) {
    params.push([...filter.status]);
    where.push(`status = ANY($${params.length})`);
  }
  if (filter.agent) {
    params.push(filter.agent);
    where.push(`agent = $${params.length}`);
  }
  if (filter.statusReason !== undefined) {
    params.push(filter.statusReason);
    where.push(`(doc::json ->> 'statusReason') = $${params.length}`);
  }
  if (filter.updatedAfter !== undefined) {
    params.push(filter.updatedAfter);
    // The indexed bucket narrows to a superset (it is the time rounded up); the time itself decides.
    params.push(updatedBucket(filter.updatedAfter));
    where.push(`updated_bucket >= $${params.length} AND updated_at > $${params.length - 1}`);
  }
  return { where: where.length ? `WHERE ${where.join(" AND ")}` : "", params };
}
