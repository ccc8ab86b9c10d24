/**
 * Group commit for a synchronous embedded database: the writes that arrive in one turn of the
 * event loop share one transaction.
 *
 * A lone writer (one run, or a quiet worker) commits at once, as before: the first write of a
 * turn runs inline. Only the writes that follow it in the same turn wait, until the loop's check
 * phase (`setImmediate`), and then commit together. With a thousand runs, the timers that end
 * their model streams and tool calls fire in one turn, so their steps' writes land in one
 * transaction instead of one each: SQLite writes the pages they share (the runs table, the
 * journal's last leaf, the indexes) once, and takes its lock once.
 *
 * A transaction holds at most `maxBatch` writes, and no more than it can apply in `budgetMs`;
 * the rest commit in the next turns' check phases, so the timers and I/O that came due in between
 * (a pause, a stream's next token) run between two batches instead of after one long one. The
 * budget is what bounds the turn: a thousand runs' steps cost ~0.16 ms each to apply on a busy
 * two-core machine, and 64 of them held the loop ~10 ms (20 ms at p99) before their callers and
 * the timers that came due meanwhile even ran; how many fit in the budget follows the machine.
 *
 * An urgent write (a control command, a claim, a write of a run's pause, cancel or halt: see
 * `control-writes.ts`) goes ahead of the ordinary ones waiting, behind the urgent ones before it:
 * under a thousand runs' steps a pause would otherwise wait out every batch queued before it.
 *
 * Each write keeps its own outcome: `commitMany` applies them in order, and one that fails (a
 * refused fence, bad input) is rolled back alone and rejects only its own caller (the SQLite
 * store applies the batch again with a savepoint per write when one throws). A write is acknowledged only once the transaction that holds it has committed.
 */
export class GroupCommit<T, R> {
  private queue: Pending<T, R>[] = [];
  /** How many of the writes at the head of `queue` are urgent. */
  private urgent = 0;
  /** A write already ran inline in this turn of the loop: the next ones wait for the check phase. */
  private busyTurn = false;
  private flushScheduled = false;

  private readonly maxBatch: number;
  private readonly budgetMs: number;
  private readonly now: () => number;

  constructor(
    private readonly commitOne: (item: T) => R,
    /**
     * Applies items in order in one transaction, each after the first only while `more()` says
     * so, and returns the outcomes of those it applied; throws only when the transaction as a
     * whole fails.
     */
    private readonly commitMany: (items: readonly T[], more: () => boolean) => Outcome<R>[],
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 64;
    this.budgetMs = options.budgetMs ?? defaultBudgetMs;
    this.now = options.now ?? (() => performance.now());
  }

  submit(item: T, urgent = false): R | Promise<R> {
    if (!this.busyTurn && this.queue.length === 0) {
      this.busyTurn = true;
      setImmediate(() => (this.busyTurn = false));
      return this.commitOne(item);
    }
    return new Promise<R>((resolve, reject) => {
      if (urgent) this.queue.splice(this.urgent++, 0, { item, resolve, reject });
      else this.queue.push({ item, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /**
   * Moves the ordinary writes that wait and match to the end of the urgent ones, in the order
   * they came: the writes a run made before a pause of it was written (its step, which its
   * executor must see committed before it can write `paused`) would otherwise wait out a
   * thousand other runs' steps queued ahead of them, and the pause with them.
   */
  promote(match: (item: T) => boolean): void {
    let at = this.urgent;
    for (let i = this.urgent; i < this.queue.length; i++) {
      if (!match(this.queue[i].item)) continue;
      const [pending] = this.queue.splice(i, 1);
      this.queue.splice(at++, 0, pending);
    }
    this.urgent = at;
  }

  /** Commits every write that waits (what `close` calls before the database goes away). */
  flushAll(): void {
    while (this.queue.length > 0) this.flush();
  }

  /**
   * Commits the oldest writes that wait, as many as `maxBatch` and the budget allow, and
   * schedules the rest for the next turn.
   */
  flush(): void {
    this.flushScheduled = false;
    if (this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    const urgentTaken = Math.min(this.urgent, batch.length);
    this.urgent -= urgentTaken;
    let outcomes: Outcome<R>[];
    try {
      if (batch.length === 1) outcomes = [{ ok: true, value: this.commitOne(batch[0].item) }];
      else {
        const started = this.now();
        outcomes = this.commitMany(
          batch.map((pending) => pending.item),
          () => this.now() - started < this.budgetMs,
        );
      }
    } catch (error) {
      this.scheduleRest();
      for (const pending of batch) pending.reject(error);
      return;
    }
    // Those the budget left go back to the head of the queue, ahead of any write since, urgent first as they were.
    const rest = batch.slice(outcomes.length);
    if (rest.length > 0) {
      this.queue.unshift(...rest);
      this.urgent += Math.max(0, urgentTaken - outcomes.length);
    }
    this.scheduleRest();
    outcomes.forEach((outcome, i) => {
      const pending = batch[i];
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
  }

  private scheduleRest(): void {
    if (this.queue.length > 0 && !this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }
}

/**
 * The longest a batch applies writes before it commits what it has (ms): short enough that
 * the timers and I/O of a thousand runs are not held back a turn behind it, long enough that
 * the transaction's fixed cost (its commit writes the pages the writes share) stays a small part
 * of each write's.
 */
export const defaultBudgetMs = 4;

export interface GroupCommitOptions {
  /** Writes a transaction holds at most. Default 64. */
  maxBatch?: number;
  /** How long a transaction applies writes before it commits those it has (ms); `Infinity` for no bound. Default `defaultBudgetMs`. */
  budgetMs?: number;
  /** The clock the budget is measured on (ms). */
  now?: () => number;
}

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Pending<T, R> {
  item: T;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}
