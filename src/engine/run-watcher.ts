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

/**
 * One per process: tells the runs this process executes about writes made elsewhere (a pause
 * from the CLI, a cancel from the dashboard of another server, a claim by another worker) and
 * keeps their leases renewed, with one timer for all of them instead of a poll per run.
 *
 * A store that can say which runs changed (`watchRuns`: SQLite in-process and through its data
 * version, PostgreSQL through LISTEN/NOTIFY) wakes the watcher, which reads only those runs; a
 * periodic check of every run's version (one query) catches anything missed. A store that
 * cannot is checked that way every `checkMs`.
 */
export class RunWatcher {
  private readonly runs = new Map<string, WatchedRun>();
  private readonly pending = new Set<string>();
  private checkAll = false;
  private draining: Promise<void> | undefined;
  private stopWatching: Promise<(() => void) | undefined> | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private renewing = false;

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

  /** Something changed for this run (or, with "*", for any run): read it soon. */
  changed(runId: string): void {
    if (runId === "*") this.checkAll = true;
    else if (this.runs.has(runId)) this.pending.add(runId);
    else return;
    this.drainSoon();
  }

  private start(): void {
    const { store } = this.options;
    if (store.watchRuns) {
      const watching = store.watchRuns((runId) => this.changed(runId));
      this.stopWatching = watching.catch(() => undefined);
    }
    this.checkTimer = setInterval(() => this.changed("*"), this.options.checkMs);
    this.checkTimer.unref?.();
    this.renewTimer = setInterval(() => void this.renewLeases(), this.options.renewCheckMs);
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


  private drainSoon(): void {
    if (this.draining) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (this.checkAll || this.pending.size > 0) this.drainSoon();
    });
  }

  private async drain(): Promise<void> {
    const { store } = this.options;
    try {
      let ids: string[];
      if (this.checkAll) {
        this.checkAll = false;
        this.pending.clear();
        ids = [...this.runs.keys()];
        if (store.runVersions && ids.length > 0) {
          const versions = await store.runVersions(ids);
          ids = ids.filter((id) => {
            const version = versions.get(id);
            const run = this.runs.get(id);
            return version !== undefined && run !== undefined && version > run.current.version;
          });
        }
      } else {
        ids = [...this.pending];
        this.pending.clear();
      }
      for (const id of ids) {
        const run = this.runs.get(id);
        if (!run) continue;
        const fresh = await store.getRun(id);
        if (fresh) run.observe(fresh);
      }
    } catch {
      // The next change or periodic check reads again; a lost lease shows up as an epoch change.
    }
  }

  private async renewLeases(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      const now = this.options.now();
      await Promise.allSettled([...this.runs.values()].map((run) => run.renewLeaseIfDue(now)));
    } finally {
      this.renewing = false;
    }
  }
}
