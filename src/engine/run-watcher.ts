import type { RunRecord, Store } from "./store.js";

/** What the watcher needs of an executing run. */
export interface WatchedRun {
  readonly runId: string;
  /** The record the executor works from. */
  readonly current: RunRecord;
  /** A newer record of the run, written by someone else. */
  observe(fresh: RunRecord): void;
  /** Extends the run's lease if it is due; resolves when written (or not needed). */
  renewLeaseIfDue(now: number): Promise<void>;
}

export interface RunWatcherOptions {
  store: Store;
  now(): number;
  /** Every run is checked this often whatever the store reports (a missed notification). */
  checkMs: number;
  /** How often leases are looked at for renewal. */
  renewCheckMs: number;
}

/** Runs read in one `getRuns` call at most. */
const readBatch = 500;

/**
 * One per process: tells the runs this process executes about writes made elsewhere (a pause
 * from the CLI, a cancel from the dashboard of another server, a claim by another worker) and
 * keeps their leases renewed, with one timer for all of them instead of a poll per run.
 *
 * A store that can say which runs changed (`watchRuns`: SQLite in-process and through its data
 * version, PostgreSQL through LISTEN/NOTIFY) wakes the watcher, which reads only those runs (with
 * `getRuns`, together), or none when the news brings the record (a PostgreSQL notification carries
 * the row where it fits); a periodic check of every run's version (one query) catches anything
 * missed. A store that cannot is checked that way every `checkMs`. The named runs are read as
 * soon as they are named, never behind a periodic check in progress.
 */
export class RunWatcher {
  private readonly runs = new Map<string, WatchedRun>();
  private readonly pending = new Set<string>();
  private checkAll = false;
  private reading: Promise<void> | undefined;
  private checking: Promise<void> | undefined;
  private stopWatching: Promise<(() => void) | undefined> | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  /** Runs whose renewal is being written. */
  private readonly renewing = new Set<string>();

  constructor(private readonly options: RunWatcherOptions) {}

  get size(): number {
    return this.runs.size;
  }

  add(run: WatchedRun): void {
    this.runs.set(run.runId, run);
    if (this.runs.size === 1) this.start();
  }

  delete(runId: string): void {
    this.runs.delete(runId);
    this.pending.delete(runId);
    if (this.runs.size === 0) this.stop();
  }

  /** Something changed for this run (or, with "*", for any run): read it soon, unless its new record came with the news. */
  changed(runId: string, record?: RunRecord): void {
    if (runId === "*") {
      this.checkAll = true;
      this.checkSoon();
      return;
    }
    const run = this.runs.get(runId);
    if (!run) return;
    if (record) {
      run.observe(record);
    } else {
      this.pending.add(runId);
      this.readSoon();
    }
  }

  private start(): void {
    const { store } = this.options;
    if (store.watchRuns) {
      const watching = store.watchRuns((runId, record) => this.changed(runId, record));
      this.stopWatching = watching.catch(() => undefined);
    }
    this.checkTimer = setInterval(() => this.changed("*"), this.options.checkMs);
    this.checkTimer.unref?.();
    this.renewTimer = setInterval(() => this.renewLeases(), this.options.renewCheckMs);
    this.renewTimer.unref?.();
  }

  private stop(): void {
    clearInterval(this.checkTimer);
    clearInterval(this.renewTimer);
    this.checkTimer = undefined;
    this.renewTimer = undefined;
    const stopping = this.stopWatching;
    this.stopWatching = undefined;
    void stopping?.then((stop) => stop?.());
  }

  private readSoon(): void {
    if (this.reading) return;
    this.reading = this.readPending().finally(() => {
      this.reading = undefined;
      if (this.pending.size > 0) this.readSoon();
    });
  }

  /** Reads the runs named since the last read, and hands each its record. */
  private async readPending(): Promise<void> {
    const { store } = this.options;
    const ids = [...this.pending].filter((id) => this.runs.has(id));
    this.pending.clear();
    for (let i = 0; i < ids.length; i += readBatch) {
      const batch = ids.slice(i, i + readBatch);
      let fresh: (RunRecord | undefined)[];
      try {
        fresh = store.getRuns ? await store.getRuns(batch) : await Promise.all(batch.map((id) => store.getRun(id)));
      } catch {
        // One run that cannot be read (a damaged row, refused as store_corrupt) must not keep the
        // others of its batch from their commands: each is read on its own. A run that still
        // fails is read again at the next change or periodic check; a lost lease shows up as an epoch change.
        fresh = await Promise.all(batch.map((id) => store.getRun(id).catch(() => undefined)));
      }
      for (const run of fresh) if (run) this.runs.get(run.id)?.observe(run);
    }
  }

  private checkSoon(): void {
    if (this.checking) return;
    this.checking = this.checkEvery().finally(() => {
      this.checking = undefined;
      if (this.checkAll) this.checkSoon();
    });
  }

  /** The periodic check: names every run whose stored version is ahead of its executor's. */
  private async checkEvery(): Promise<void> {
    const { store } = this.options;
    this.checkAll = false;
    let ids = [...this.runs.keys()];
    if (ids.length === 0) return;
    try {
      if (store.runVersions) {
        const versions = await store.runVersions(ids);
        ids = ids.filter((id) => {
          const version = versions.get(id);
          const run = this.runs.get(id);
          return version !== undefined && run !== undefined && version > run.current.version;
        });
      }
    } catch {
      return;
    }
    for (const id of ids) if (this.runs.has(id)) this.pending.add(id);
    if (this.pending.size > 0) this.readSoon();
  }

  /**
   * Renews every lease that is due, each run on its own: a renewal that waits (behind a write of
   * its run that waits for the store) holds back only its own run's next renewal, never the
   * others'. Under load one slow write held back every run's renewal until it landed, and runs
   * whose worker was alive and well lost their leases to other workers.
   */
  private renewLeases(): void {
    const now = this.options.now();
    for (const run of this.runs.values()) {
      if (this.renewing.has(run.runId)) continue;
      this.renewing.add(run.runId);
      void run
        .renewLeaseIfDue(now)
        .catch(() => undefined)
        .finally(() => this.renewing.delete(run.runId));
    }
  }
}
