import { approvalRequired, nextApprovalDeadline } from "./approval.js";
import type { EngineContext } from "./engine-context.js";
import type { RunRecord } from "./store.js";

export interface ApprovalDeadlineOptions {
  /** How often the deadlines known to this process are checked against the clock. Default 1000. */
  checkMs?: number;
  /** How often every paused run is read for deadlines set by other processes. Default 60 000. */
  rescanMs?: number;
}

/**
 * When approvals pass their deadline, in a worker. The deadlines this process learns of as its
 * executors write them (`note`) and from a scan of the paused runs (at start, then every
 * `rescanMs`) are checked every `checkMs`: the cost between scans is the number of deadlines
 * waiting, not the number of stored runs.
 */
export class ApprovalDeadlines {
  private readonly due = new Map<string, number>();
  private checkTimer: NodeJS.Timeout | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    private readonly ctx: Pick<EngineContext, "store" | "clock">,
    /** Applies the run's passed deadlines; returns the run after, or undefined if it is gone. */
    private readonly expire: (runId: string) => Promise<RunRecord | undefined>,
    private readonly options: ApprovalDeadlineOptions = {},
  ) {}

  start(): void {
    if (this.checkTimer) return;
    this.checkTimer = setInterval(() => void this.check(), this.options.checkMs ?? 1_000);
    this.checkTimer.unref?.();
    this.rescanTimer = setInterval(() => void this.rescan().catch(() => undefined), this.options.rescanMs ?? 60_000);
    this.rescanTimer.unref?.();
    void this.rescan().catch(() => undefined);
  }

  stop(): void {
    clearInterval(this.checkTimer);
    clearInterval(this.rescanTimer);
    this.checkTimer = undefined;
    this.rescanTimer = undefined;
  }

  /** A deadline this process wrote; kept only while started (a process that is no worker leaves deadlines to workers). */
  note(runId: string, at: number): void {
    if (!this.checkTimer) return;
    const known = this.due.get(runId);
    if (known === undefined || at < known) this.due.set(runId, at);
  }

  /**
   * The next deadline of every run that waits for approval (or was halted meanwhile), read from
   * the store: only those runs, so a worker's cost does not grow with the paused runs it stores.
   */
  async rescan(): Promise<void> {
    const waiting = await this.ctx.store.listRuns({ status: ["paused", "pausing"], statusReason: approvalRequired, limit: 100_000 });
    const halted = await this.ctx.store.listRuns({ status: ["halted"], limit: 100_000 });
    for (const run of [...waiting, ...halted]) {
      const next = nextApprovalDeadline(run);
      if (next !== undefined) this.note(run.id, next);
    }
  }

  /** Applies the deadlines that passed; a run's next deadline, if any, is kept. */
  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const now = this.ctx.clock.now();
      for (const [runId, at] of [...this.due]) {
        if (at > now) continue;
        this.due.delete(runId);
        const after = await this.expire(runId).catch(() => undefined);
        const next = after && nextApprovalDeadline(after);
        if (next !== undefined) this.note(runId, next);
      }
    } finally {
      this.checking = false;
    }
  }
}
