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
 * A transaction holds at most `maxBatch` writes; the rest commit in the next turns' check
 * phases, so the timers and I/O that came due in between (a pause, a stream's next token) run
 * between two batches instead of after one long one.
 *
 * An urgent write (a control command, a claim, a write of a run's pause, cancel or halt: see
 * `control-writes.ts`) goes ahead of the ordinary ones waiting, behind the urgent ones before it:
 * under a thousand runs' steps a pause would otherwise wait out every batch queued before it.
 *
 * Each write keeps its own outcome: `commitMany` applies them in order, each in its own
 * savepoint, so one that fails (a refused fence, bad input) is rolled back alone and rejects only
 * its own caller. A write is acknowledged only once the transaction that holds it has committed.
 */
export class GroupCommit<T, R> {
  private queue: Pending<T, R>[] = [];
  /** How many of the writes at the head of `queue` are urgent. */
  private urgent = 0;
  /** A write already ran inline in this turn of the loop: the next ones wait for the check phase. */
  private busyTurn = false;
  private flushScheduled = false;

  constructor(
    private readonly commitOne: (item: T) => R,
    /** Applies every item in one transaction; throws only when the transaction as a whole fails. */
    private readonly commitMany: (items: readonly T[]) => Outcome<R>[],
    private readonly maxBatch = 64,
  ) {}

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

  /** Commits every write that waits (what `close` calls before the database goes away). */
  flushAll(): void {
    while (this.queue.length > 0) this.flush();
  }

  /** Commits the oldest `maxBatch` writes that wait, and schedules the rest for the next turn. */
  flush(): void {
    this.flushScheduled = false;
    if (this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.urgent = Math.max(0, this.urgent - batch.length);
    if (this.queue.length > 0) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    let outcomes: Outcome<R>[];
    try {
      outcomes = batch.length === 1 ? [{ ok: true, value: this.commitOne(batch[0].item) }] : this.commitMany(batch.map((pending) => pending.item));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
      return;
    }
    batch.forEach((pending, i) => {
      const outcome = outcomes[i];
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
  }
}

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Pending<T, R> {
  item: T;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}
