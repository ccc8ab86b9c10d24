import type { AgentDefinition } from "./agent.js";
import { checkClaimed, needsClaimCheck } from "./claim-checks.js";
import type { EngineContext } from "./engine-context.js";
import { createExecutor } from "./executors.js";
import { heldByGoneProcess } from "./lease-holder.js";
import type { ResourceHolder } from "./resources.js";
import type { RunSession } from "./run-session.js";
import type { RunWatcher } from "./run-watcher.js";
import { isTerminal, type RunStatus } from "./status.js";
import { statusEntry } from "./status-entry.js";
import type { JournalInput, RunRecord, RunUpdate, UpdateResult } from "./store.js";

/**
 * This process's share of the runs: it claims queued and orphaned runs (up to `concurrency`),
 * takes their leases (fencing epoch + 1) and executes them, and keeps the executors it runs.
 */
export class RunClaims {
  /** The runs this process executes now, each with the promise that settles when it stops. */
  readonly executors = new Map<string, { executor: RunSession; done: Promise<void> }>();
  /** Runs claimed here whose checks before the first call (claim-checks.ts) are under way. */
  readonly checking = new Map<string, Promise<void>>();
  /**
   * Runs whose claim by this process is being written: from the claim's send until the run is
   * among `executors` or `checking`. A look for orphans that read the run meanwhile would find
   * this process's own lease on it and claim it a second time, fencing off its own executor.
   */
  private readonly beingClaimed = new Set<string>();
  /** Places held by runs being created claimed by this process (`claimNew`), until they execute here. */
  private creating = 0;
  /**
   * Live resource handles of runs this process stopped executing with resources kept (a pause
   * that keeps them), by run, with the epoch the run had here: the next executor of the run here
   * reuses them; once the run is another worker's or has ended, `sweepHeldResources` abandons them.
   */
  private readonly resourceHolders = new Map<string, { holder: ResourceHolder; epoch: number }>();
  private sweepTimer: ReturnType<typeof setInterval> | undefined;
  /** Abandons under way (`letGo`): `abandonHeldResources` waits for them. */
  private readonly abandoning = new Set<Promise<void>>();
  private claiming: Promise<void> | undefined;
  private claimAgain = false;
  private recovering: Promise<void> | undefined;

  constructor(
    private readonly ctx: EngineContext,
    private readonly watcher: RunWatcher,
    /** Runs this process executes at once. */
    readonly concurrency: number,
    private readonly state: {
      /** The process has closed: it takes nothing more. */
      closed(): boolean;
      /** The worker is polling (started, not stopped). */
      polling(): boolean;
    },
  ) {}

  /** Looks for work now, unless a look is under way (then once more after it). */
  claimSoonAvailable(): void {
    if (!this.state.polling() || this.state.closed()) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = this.claimAvailable().finally(() => {
      this.claiming = undefined;
      if (this.claimAgain) {
        this.claimAgain = false;
        this.claimSoonAvailable();
      }
    });
  }

  private async claimAvailable(): Promise<void> {
    if (this.state.closed()) return;
    try {
      const now = this.ctx.clock.now();
      const store = this.ctx.store;
      const room = this.concurrency - this.size;
      if (room <= 0) return;
      if (store.claimRuns) {
        // The store locks what it hands out: workers looking at once get different runs.
        const claiming: string[] = [];
        try {
          const claimed = await store.claimRuns(now, Math.min(room, 50), (run, halts) => {
            const update = this.wanted(run, halts) ? this.claimUpdate(run, now) : undefined;
            if (update) {
              this.beingClaimed.add(run.id);
              claiming.push(run.id);
            }
            return update;
          });
          for (const result of claimed) if (result.ok) this.startExecuting(result);
        } finally {
          for (const id of claiming) this.beingClaimed.delete(id);
        }
        return;
      }
      const halts = await store.listHalts();
      for (const run of await store.findClaimable(now, Math.min(room, 50))) {
        if (this.size >= this.concurrency) break;
        if (this.wanted(run, halts)) await this.tryClaim(run);
      }
    } catch {
      // The next tick tries again.
    }
  }

  /** A run this process would take: not already its own, an agent it has, and not halted (a cancel still runs under a halt). */
  private wanted(run: RunRecord, halts: readonly { scope: string }[]): boolean {
    return (
      !this.executors.has(run.id) &&
      !this.checking.has(run.id) &&
      !this.beingClaimed.has(run.id) &&
      this.ctx.agents.has(run.agent) &&
      (run.status === "cancelling" || !halts.some((h) => h.scope === "*" || h.scope === `agent:${run.agent}`))
    );
  }

  /**
   * Takes back the runs left active (running, pausing, cancelling) by a process that is gone: a
   * process on this host that exited holds them (`processProbe`: at once, however long its lease
   * still says), or their lease ran out. A restarted process calls this first, so its own runs go
   * on without waiting out their leases. Queued runs are left to `startWorker`'s polling.
   */
  recoverOrphans(options: { scanLeases: boolean }): Promise<void> {
    if (this.state.closed()) return Promise.resolve();
    this.recovering ??= this.recoverNow(options.scanLeases).finally(() => {
      this.recovering = undefined;
    });
    return this.recovering;
  }

  /** Settles when the look for orphaned runs under way (if any) is over. */
  get recovery(): Promise<void> {
    return this.recovering ?? Promise.resolve();
  }

  private async recoverNow(scanLeases: boolean): Promise<void> {
    try {
      const store = this.ctx.store;
      const now = this.ctx.clock.now();
      // Every active run when this process can tell dead holders (their leases look live); else
      // the runs whose lease ran out, which the store finds by its index.
      const candidates =
        scanLeases && this.ctx.processProbe
          ? await store.listRuns({ status: ["running", "pausing", "cancelling"], limit: 100_000 })
          : (await store.findClaimable(now, 500)).filter((run) => run.status !== "queued");
      if (candidates.length === 0) return;
      const halts = await store.listHalts();
      for (const run of candidates) {
        if (this.state.closed() || this.size >= this.concurrency) return;
        if (!this.wanted(run, halts)) continue;
        const gone = heldByGoneProcess(this.ctx.processProbe, run.lease);
        if (!gone && run.lease && run.lease.until >= now && run.lease.workerId !== this.ctx.workerId) continue;
        const update = this.claimUpdate(run, now, gone);
        if (!update) continue;
        await this.claimWith(run.id, update);
      }
    } catch {
      // The next look tries again.
    }
  }

  /** Claims in the background: if the claim fails the run stays claimable, and a worker's next poll takes it. */
  claimSoon(run: RunRecord): void {
    this.tryClaim(run).catch(() => undefined);
  }

  /**
   * The lease a control write (a resume) can take for this worker, so that one write both
   * resumes and claims the run; undefined when this worker cannot execute the run at once (full,
   * its previous executor still winding down, a lease held, another claim of it under way), and
   * it is claimed after instead. Names the run as being claimed until `inlineClaimSettled`: a
   * look for work that read the run once the write landed would otherwise find this process's
   * own live lease on it, claim it a second time and fence off the executor about to start.
   */
  inlineClaim(run: RunRecord, now: number): NonNullable<RunUpdate["claim"]> | undefined {
    if (run.lease !== null || this.state.closed() || this.executors.has(run.id) || this.checking.has(run.id) || this.beingClaimed.has(run.id)) return undefined;
    if (this.size >= this.concurrency || !this.ctx.agents.has(run.agent)) return undefined;
    this.beingClaimed.add(run.id);
    return this.leaseFor(now);
  }

  /** The control write that `inlineClaim` gave a lease is over: `run` when it was applied with that lease (it executes now). */
  inlineClaimSettled(runId: string, run?: RunRecord): void {
    this.beingClaimed.delete(runId);
    if (run) this.executeClaimed(run);
  }

  /**
   * The lease for a run this process is about to create, so that its creation claims it (one
   * write for both, and its first snapshot handed over rather than read back); undefined when
   * this worker could not execute it at once (full, closed, the agent not here), and it is
   * created queued instead. Holds a place, and names the run as being claimed (an orphan look
   * must not take it meanwhile), until `createdClaimed`.
   */
  claimNew(runId: string, agent: string, now: number): NonNullable<RunUpdate["claim"]> | undefined {
    if (this.state.closed() || this.size >= this.concurrency || !this.ctx.agents.has(agent)) return undefined;
    this.creating += 1;
    this.beingClaimed.add(runId);
    return this.leaseFor(now);
  }

  /** The run `claimNew` leased is written (`run`: it executes now) or failed to be (the place is given back). */
  createdClaimed(runId: string, run?: RunRecord): void {
    this.creating -= 1;
    this.beingClaimed.delete(runId);
    if (run) this.executeClaimed(run);
  }

  /** This worker's lease from `now`, naming its process when the runtime has a probe. */
  private leaseFor(now: number): NonNullable<RunUpdate["claim"]> {
    const holder = this.ctx.processProbe?.self;
    return { workerId: this.ctx.workerId, until: now + this.ctx.leaseMs, ...(holder ? { holder } : {}) };
  }

  /** Executes a run whose lease a write took for this worker (`inlineClaim`, `claimNew`); its journal is published by that write. */
  private executeClaimed(run: RunRecord): void {
    if (this.state.closed()) return; // The lease lapses, and another worker takes the run.
    this.begin(run);
  }

  /** Takes the run's lease (fencing epoch + 1) and executes it in this process. */
  private async tryClaim(candidate: RunRecord): Promise<void> {
    let run = candidate;
    const previous = this.executors.get(run.id)?.done ?? this.checking.get(run.id);
    if (previous) {
      // A run resumed the moment its pause landed: the executor that paused it is still winding down.
      await previous;
      const fresh = await this.ctx.store.getRun(run.id);
      if (!fresh) return;
      run = fresh;
    }
    if (this.executors.has(run.id) || this.checking.has(run.id) || this.beingClaimed.has(run.id) || this.state.closed()) return;
    // Full: the run waits in the store, and this worker's next look (or any other worker) takes it.
    if (this.size >= this.concurrency) return;
    if (!this.ctx.agents.has(run.agent)) return;
    const now = this.ctx.clock.now();
    const update = this.claimUpdate(run, now);
    if (!update) return;
    await this.claimWith(run.id, update);
  }

  /** Writes a claim and executes the run once it holds; `beingClaimed` names the run meanwhile. */
  private async claimWith(runId: string, update: Omit<RunUpdate, "runId">): Promise<void> {
    this.beingClaimed.add(runId);
    try {
      const result = await this.ctx.store.update({ ...update, runId });
      if (result.ok) this.startExecuting(result);
    } finally {
      this.beingClaimed.delete(runId);
    }
  }

  /**
   * The write that claims a run for this worker: lease, fencing epoch + 1, and what the journal
   * says of it. `holderGone`: the lease still looks live but its process is known to have exited;
   * the claim then expects only the version read, which pins the very lease judged gone.
   */
  private claimUpdate(run: RunRecord, now: number, holderGone = false): Omit<RunUpdate, "runId"> | undefined {
    const claimable: RunStatus[] = ["queued", "running", "pausing", "cancelling"];
    if (!claimable.includes(run.status)) return undefined;
    const journal: JournalInput[] = [];
    if (run.status === "queued") journal.push(statusEntry(now, "queued", "running"));
    else if (run.lease) {
      journal.push({ type: "recovery", at: now, data: { previousWorker: run.lease.workerId, worker: this.ctx.workerId, status: run.status, ...(holderGone ? { holderGone: true } : {}) } });
    }
    // Taking over from a dead worker: it ran at most until its lease ran out (a holder known gone:
    // about until its last renewal, a lease length before `until`); the time the run sat orphaned
    // after that is not running time.
    const since = run.runningSince;
    const stopped = run.lease && (holderGone ? run.lease.until - this.ctx.leaseMs : run.lease.until);
    const orphaned = stopped !== null && since !== null ? { activeMs: run.activeMs + Math.max(0, Math.min(now, stopped) - since), runningSince: now } : {};
    return {
      expect: holderGone ? { version: run.version } : { version: run.version, leaseFree: { now, workerId: this.ctx.workerId } },
      claim: this.leaseFor(now),
      set: { ...(run.status === "queued" || run.status === "running" ? { status: "running", runningSince: since ?? now } : {}), ...orphaned },
      journal,
    };
  }

  /** Runs executed, being checked or being created claimed here: what `concurrency` bounds. */
  get size(): number {
    return this.executors.size + this.checking.size + this.creating;
  }

  /** Executes a run this worker has just claimed, after the checks it needs first (claim-checks.ts). */
  private startExecuting(result: UpdateResult & { ok: true }): void {
    if (this.executors.has(result.run.id) || this.checking.has(result.run.id)) return;
    this.ctx.bus.publishJournal(result.journal);
    this.begin(result.run);
  }

  private begin(run: RunRecord): void {
    const agent = this.ctx.agents.get(run.agent);
    if (!agent || this.executors.has(run.id) || this.checking.has(run.id)) return;
    if (!needsClaimCheck(agent, run)) return this.execute(agent, run);
    const checked = checkClaimed(this.ctx, agent, run)
      .catch(() => undefined)
      .then((ready) => {
        this.checking.delete(run.id);
        // Failed or paused by a check: the lease lapses or was let go, and the place is free.
        if (ready && !this.state.closed()) this.execute(agent, ready);
        else {
          // Claimed here and stopped by the check: handles kept for the run are still its own.
          const kept = this.resourceHolders.get(run.id);
          // (A new entry, not the old one changed: a sweep that read the run before compares entries.)
          if (kept && run.epoch === kept.epoch + 1) this.resourceHolders.set(run.id, { holder: kept.holder, epoch: run.epoch });
          this.claimSoonAvailable();
        }
      });
    this.checking.set(run.id, checked);
  }

  /**
   * The handles this process kept for `run` (claimed here now), if they are still the run's: no
   * other worker claimed it since they were kept (a claim moves the epoch by one). Otherwise
   * another holder re-attached what the record names meanwhile: these are abandoned, and the
   * executor acquires with the record as it is now.
   */
  private keptHandles(run: RunRecord): ResourceHolder | undefined {
    const kept = this.resourceHolders.get(run.id);
    if (!kept) return undefined;
    if (run.epoch === kept.epoch + 1) return kept.holder;
    this.resourceHolders.delete(run.id);
    this.letGo(kept.holder);
    return undefined;
  }

  /** Abandons a holder's handles; `close` waits for those under way. */
  private letGo(holder: ResourceHolder): void {
    const done = holder.abandon().then(
      () => undefined,
      () => undefined,
    );
    this.abandoning.add(done);
    void done.finally(() => this.abandoning.delete(done));
  }

  private keepHandles(runId: string, holder: ResourceHolder, epoch: number): void {
    this.resourceHolders.set(runId, { holder, epoch });
    if (this.sweepTimer || this.state.closed()) return;
    this.sweepTimer = setInterval(() => void this.sweepHeldResources().catch(() => undefined), this.ctx.leaseMs);
    this.sweepTimer.unref?.();
  }

  /**
   * Abandons the kept handles of runs that are no longer this process's: claimed by another
   * worker since (another epoch), ended elsewhere, or gone. One read of those runs; runs
   * executing or being claimed here are left alone.
   */
  async sweepHeldResources(): Promise<void> {
    const idle = (id: string) => !this.executors.has(id) && !this.checking.has(id) && !this.beingClaimed.has(id);
    const ids = [...this.resourceHolders.keys()].filter(idle);
    // Each as it was before the read: one kept again meanwhile (claimed, run and paused here) is newer than the read.
    const seen = new Map(ids.map((id) => [id, this.resourceHolders.get(id)]));
    if (ids.length > 0) {
      const store = this.ctx.store;
      const runs = store.getRuns ? await store.getRuns(ids) : (await Promise.all(ids.map((id) => store.getRun(id)))).filter((r): r is RunRecord => r !== undefined);
      const byId = new Map(runs.map((run) => [run.id, run]));
      for (const id of ids) {
        const kept = this.resourceHolders.get(id);
        const run = byId.get(id);
        // Read before a claim of this process took the run: its executor holds the handles now.
        if (!kept || kept !== seen.get(id) || !idle(id) || (run && run.epoch === kept.epoch && !isTerminal(run.status))) continue;
        this.resourceHolders.delete(id);
        this.letGo(kept.holder);
      }
    }
    if (this.resourceHolders.size === 0) this.stopSweeping();
  }

  /** The runtime closes: every kept handle is let go (the runs' next holders take over what the records name). */
  async abandonHeldResources(): Promise<void> {
    this.stopSweeping();
    const kept = [...this.resourceHolders.values()];
    this.resourceHolders.clear();
    for (const { holder } of kept) this.letGo(holder);
    await Promise.all([...this.abandoning]);
  }

  private stopSweeping(): void {
    clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  private execute(agent: AgentDefinition, run: RunRecord): void {
    const executor = createExecutor(this.ctx, agent, run, this.keptHandles(run));
    this.watcher.add(executor);
    const done = executor.execute().finally(() => {
      this.executors.delete(run.id);
      this.watcher.delete(run.id);
      // A place is free: take the next queued run now rather than at the next tick.
      this.claimSoonAvailable();
      // A resource kept over a pause stays live in this process; the next executor of the run
      // reuses it. The lease lost, the run is another worker's: its handles are let go now.
      if (executor.resources.holdsAny && !executor.leaseLost) this.keepHandles(run.id, executor.resources, executor.current.epoch);
      else {
        this.resourceHolders.delete(run.id);
        if (executor.resources.holdsAny) this.letGo(executor.resources);
      }
      if (isTerminal(executor.current.status)) this.ctx.bus.forget(run.id);
      // Let go after a store error: taken again here a moment later (a worker's poll would too).
      if (executor.letGoForRecovery) setTimeout(() => this.claimSoon(executor.current), storeErrorRetryMs).unref();
    });
    this.executors.set(run.id, { executor, done });
  }
}

/** How long after a store error a run this process let go is taken again. */
const storeErrorRetryMs = 250;
