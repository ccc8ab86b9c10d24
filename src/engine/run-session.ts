import type { AgentDefinition } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import { LeaseLostError, SnapshotCorruptError, TetherError } from "./errors.js";
import type { Json } from "./json.js";
import { ResourceHolder } from "./resources.js";
import { restoreState, type SnapshotWriter } from "./snapshot.js";
import type { AgentState } from "./state.js";
import type { EffectRecord, InflightCall, JournalInput, RunPatch, RunRecord, RunUpdate } from "./store.js";
import type { CompensationContext } from "./tool.js";
import { runCancellation } from "./compensation.js";
import { statusEntry } from "./status-entry.js";

export type Compensator = (input: Json, result: Json, ctx: CompensationContext) => Promise<void> | void;

/** The times each run was let go after a store error (`letGoAfterStoreError`), per engine. */
const storeErrorLetGos = new WeakMap<EngineContext, Map<string, number[]>>();
const maxStoreErrorLetGos = 3;
const storeErrorWindowMs = 60_000;

/** A write of this run (the update without its id), with fields `K` present. */
type WriteOf<K extends keyof RunUpdate> = Omit<RunUpdate, "runId"> & Required<Pick<RunUpdate, K>>;

/** A call in flight as a pause or cancel sees it: `abortable` when it may be stopped mid-way (every model call). */
export interface CallInFlight {
  abortable: boolean;
  controller: AbortController;
  inflight: InflightCall;
}

/** What `untilStopped` rejects with when the run is halted or the lease lost before the call settles. */
export const stopped = Symbol("stopped");

/**
 * One claimed run from the executor's side: the record as this worker last saw it, every write
 * fenced by the lease's epoch (and carrying the lease on), the reaction to control commands
 * written elsewhere, and the lifecycle moves every kind of agent shares (finish a pause,
 * complete, fail, cancel with compensation, leave a halted run). How calls are planned and made
 * is the subclass's: the step machine (`executor.ts`) or an async function (`function-executor.ts`).
 */
export abstract class RunSession {
  protected run: RunRecord;
  protected state!: AgentState;
  protected writer!: SnapshotWriter;
  readonly resources: ResourceHolder;
  /** Fires when the run is halted or the lease is lost: stop waiting for anything. */
  protected readonly stopAll = new AbortController();
  private lastRenewal: number;
  /** Set when a write or a record showed another epoch: another worker holds the run now. */
  leaseLost = false;
  /** Set by `detach`: from then on this executor writes nothing, as if its process had died. */
  protected detached = false;
  /**
   * Set once a halted run is let go (`leaveHalted`): the version of the run as this executor last
   * wrote it. A call that ignored its signal may still end; its result is written only while no
   * one else has written the run's state since (a person's edit, the steps of a resumed run), which
   * a snapshot built from this executor's state would corrupt.
   */
  private letGoAt: number | undefined;

  constructor(
    protected readonly ctx: EngineContext,
    protected readonly agent: AgentDefinition,
    claimed: RunRecord,
    /** Handles this process still holds for the run from an earlier executor (a resource kept over a pause). */
    resources?: ResourceHolder,
  ) {
    this.run = claimed;
    this.lastRenewal = ctx.clock.now();
    this.resources = resources ?? new ResourceHolder(claimed.id, agent.resources ?? [], ctx.clock);
  }

  get runId(): string {
    return this.run.id;
  }

  get current(): RunRecord {
    return this.run;
  }

  /** Runs the agent until the run stops here: completed, failed, paused, cancelled, halted, or the lease lost. */
  async execute(): Promise<void> {
    try {
      await this.drive(await this.load());
    } catch (error) {
      if (TetherError.isInstance(error) && error.code === "lease_lost") return;
      await this.failUnexpectedly(error);
    } finally {
      this.abortCalls(new LeaseLostError(this.run.id));
    }
  }

  /** Steps the run while it is running; `hasState` is false when its snapshot could not be read. */
  protected abstract drive(hasState: boolean): Promise<void>;

  /** Aborts every call in flight (a halt, a lost lease, a detach). */
  protected abstract abortCalls(reason: unknown): void;

  /** Reacts to the current record: a pause, cancel or halt reaching the calls in flight. */
  protected abstract react(): void;

  /** Stops executing here without changing the run: its lease lapses and any worker recovers it. */
  detach(): void {
    this.detached = true;
    this.stopAll.abort("detached");
    this.abortCalls("detached");
  }

  /** Called with a newer record of the run (a control command from this process, or a poll). */
  observe(fresh: RunRecord): void {
    if (fresh.version <= this.run.version) return;
    if (fresh.epoch !== this.run.epoch) {
      this.leaseLost = true;
      this.stopAll.abort(new LeaseLostError(this.run.id));
      this.abortCalls(new LeaseLostError(this.run.id));
      return;
    }
    this.adopt(fresh);
  }

  /**
   * Takes a newer record as current. A control command may arrive in a record returned by this
   * executor's own write (a progress note, a lease renewal), so every newer record is reacted to.
   */
  private adopt(fresh: RunRecord): void {
    this.run = fresh;
    this.ctx.bus.advanceTo(fresh.id, fresh.journalSeq);
    this.ctx.bus.nudge(fresh.id);
    this.react();
  }

  /** Shows what a pause or cancel waits for: the call that must finish first. */
  protected async markWaiting(kind: "model" | "tool", inflight: InflightCall): Promise<void> {
    // Since the call started, as the run view reports before this lands: the timer never jumps back.
    await this.write({ set: { waitingFor: { kind, name: inflight.name, callSeq: inflight.callSeq, since: inflight.startedAt } } });
  }

  private writes: Promise<unknown> = Promise.resolve();

  /** Runs a write that patches from the current record after every write queued before it (several calls may be in flight). */
  protected serial<T>(write: () => Promise<T>): Promise<T> {
    const next = this.writes.then(write, write);
    this.writes = next.catch(() => undefined);
    return next;
  }

  /**
   * A pause or cancel reaches the calls in flight (in call order): model calls and abortable
   * calls are aborted, unless the pause waits for the step boundary; the first of the others is
   * shown as what the run waits for, if it is still in flight once the writes before it landed.
   */
  protected reachCallsInFlight(calls: readonly CallInFlight[], stillInFlight: (callSeq: number) => boolean): void {
    const { status } = this.run;
    if (status !== "pausing" && status !== "cancelling") return;
    const immediate = status === "cancelling" || this.run.pauseMode !== "boundary";
    let waitingOn: CallInFlight | undefined;
    for (const call of [...calls].sort((a, b) => a.inflight.callSeq - b.inflight.callSeq)) {
      if (immediate && call.abortable) call.controller.abort(status === "cancelling" ? "cancel" : "pause");
      else waitingOn ??= call;
    }
    if (!waitingOn || this.run.waitingFor) return;
    const { inflight } = waitingOn;
    void this.serial(async () => {
      if (!this.run.waitingFor && stillInFlight(inflight.callSeq)) await this.markWaiting(inflight.kind, inflight);
    }).catch(() => undefined);
  }

  /** A lease renewal is due a third of the way through the lease. */
  private renewalDue(now: number): boolean {
    return this.run.lease !== null && now - this.lastRenewal > this.ctx.leaseMs / 3 && !this.stopAll.signal.aborted && !this.detached;
  }

  /** Called by the process's watcher: a run waiting in a long call keeps its lease. */
  async renewLeaseIfDue(now: number): Promise<void> {
    if (!this.renewalDue(now)) return;
    try {
      await this.write({});
    } catch {
      // A lost lease shows up as an epoch change and stops the run here.
    }
  }

  /** Writes with this worker's fencing token; false when an expectation on status failed. */
  protected async write(update: Omit<RunUpdate, "runId">): Promise<boolean> {
    if (this.detached) throw new LeaseLostError(this.run.id);
    // Every write of a working run carries the lease on: only a run that writes nothing for a
    // third of its lease needs a write of its own (see renewLeaseIfDue).
    const now = this.ctx.clock.now();
    let renewLease: RunUpdate["renewLease"];
    if (this.renewalDue(now)) {
      this.lastRenewal = now;
      renewLease = { workerId: this.ctx.workerId, until: now + this.ctx.leaseMs };
    }
    const expect = { ...update.expect, epoch: this.run.epoch, ...(this.letGoAt !== undefined ? { version: this.letGoAt } : {}) };
    const result = await this.ctx.store.update({ ...update, ...(renewLease ? { renewLease } : {}), runId: this.run.id, expect });
    if (!result.ok) {
      if (result.run.epoch !== this.run.epoch) {
        this.leaseLost = true;
        this.stopAll.abort(new LeaseLostError(this.run.id));
        throw new LeaseLostError(this.run.id);
      }
      if (this.letGoAt !== undefined) {
        // Let go, and someone wrote the run's state since (a person's edit, a resumed run's
        // steps): a snapshot built from this executor's state would overwrite theirs, so what is
        // left of it writes nothing more. Any other write (an unhalt, a command) leaves its state
        // as it was: the write goes on against the record as it is now.
        if (result.run.snapshotSeq !== this.run.snapshotSeq) throw new LeaseLostError(this.run.id);
        this.letGoAt = result.run.version;
        return this.write(update);
      }
      this.observe(result.run);
      return false;
    }
    if (this.letGoAt !== undefined) this.letGoAt = result.run.version;
    if (result.run.version > this.run.version) this.adopt(result.run);
    this.ctx.bus.publishJournal(result.journal);
    return true;
  }

  /** A call that ignores its signal is not waited for once the run is halted or the lease lost: rejects with `stopped`. */
  protected untilStopped<T>(promise: Promise<T>): Promise<T> {
    const signal = this.stopAll.signal;
    if (signal.aborted) return Promise.reject(stopped);
    return new Promise<T>((resolve, reject) => {
      const onStop = () => reject(stopped);
      signal.addEventListener("abort", onStop, { once: true });
      promise.then(
        (value) => {
          signal.removeEventListener("abort", onStop);
          resolve(value);
        },
        (error) => {
          signal.removeEventListener("abort", onStop);
          reject(error);
        },
      );
    });
  }

  protected now(): number {
    return this.ctx.clock.now();
  }

  protected leavingRunning(): RunPatch {
    const since = this.run.runningSince;
    return { runningSince: null, activeMs: this.run.activeMs + (since === null ? 0 : this.now() - since) };
  }

  /** Reads the latest snapshot; false if it is corrupt, and the run was set aside or can only be cancelled. */
  private async load(): Promise<boolean> {
    try {
      const handed = this.ctx.snapshots.take(this.run.id, this.run.snapshotSeq);
      const restored = handed ? restoreState(this.run.id, handed.stored, handed.chain) : restoreState(this.run.id, await this.ctx.store.loadState(this.run.id));
      this.state = restored.state;
      this.writer = restored.writer;
      return true;
    } catch (error) {
      if (!(error instanceof SnapshotCorruptError)) throw error;
      // Nothing is deleted. Compensation needs no agent state, so a cancel goes on; anything else
      // waits, paused, for a person to look at the store.
      const from = this.run.status;
      const at = this.now();
      if (from === "cancelling") {
        await this.write({ journal: [{ type: "recovery", at, data: { problem: error.message } }] });
        return false;
      }
      if (from !== "running" && from !== "pausing") return false;
      await this.write({
        expect: { status: [from] },
        set: { status: "paused", statusReason: `snapshot_corrupt: ${error.message}`, lease: null, waitingFor: null, pauseMode: null, ...this.leavingRunning() },
        journal: [...(from === "running" ? [statusEntry(at, from, "pausing", "snapshot_corrupt")] : []), statusEntry(at, "pausing", "paused", "snapshot_corrupt")],
      });
      return false;
    }
  }

  protected async requestPause(reason: string, entries: JournalInput[] = []): Promise<boolean> {
    return this.write({
      expect: { status: ["running"] },
      set: { status: "pausing", statusReason: reason, pauseMode: "immediate" },
      journal: [...entries, statusEntry(this.now(), "running", "pausing", reason)],
    });
  }

  protected async acquireResources(): Promise<void> {
    for await (const change of this.resources.acquireMissing(this.run.resources, this.stopAll.signal)) {
      await this.write({ set: { resources: change.resources }, journal: [change.journal] });
    }
  }

  async releaseResources(forPause: boolean): Promise<{ released: string[]; failed: { name: string; error: string }[] }> {
    const released: string[] = [];
    const failed: { name: string; error: string }[] = [];
    for await (const change of this.resources.release(this.run.resources, { forPause })) {
      await this.write({ set: { resources: change.resources }, journal: [change.journal] });
      if (change.failed) failed.push(change.failed);
      else released.push(String(change.journal.data.name));
    }
    return { released, failed };
  }

  /** pausing → paused once no call is in flight: release what pauses release, give up the lease. */
  protected async finishPause(): Promise<boolean> {
    await this.releaseResources(true);
    return this.write(this.pausedUpdate());
  }

  /** What finishing a pause writes: pausing → paused, the lease given up, the pause command applied. */
  private pausedUpdate(): WriteOf<"set" | "journal"> {
    const at = this.now();
    return {
      expect: { status: ["pausing"] },
      set: { status: "paused", waitingFor: null, pauseMode: null, lease: null, ...this.leavingRunning() },
      journal: [statusEntry(at, "pausing", "paused", this.run.statusReason)],
      settleCommands: { at, outcomes: { pause: "applied" } },
    };
  }

  /**
   * Journals a call a pause or cancel stopped (the update `stoppedCall` builds from the current
   * record, after the writes queued before it). When the run is pausing, nothing else is in flight
   * (`othersInFlight`) and the pause has nothing to release, the same write finishes the pause:
   * one transaction instead of two, so a person's pause lands a round trip sooner on a busy
   * worker. If the run moved meanwhile (a cancel came), the call alone is journaled, built again
   * from the record as it is, and the run goes on as it would have.
   */
  protected writeStoppedCall(stoppedCall: () => WriteOf<"set" | "journal">, othersInFlight: () => boolean): Promise<void> {
    return this.serial(() => this.writeEndingPause(stoppedCall, othersInFlight));
  }

  /**
   * Writes the end of a call (`callEnd`), finishing a pause in the same write when the run is
   * pausing, nothing else is in flight and nothing is released on pause (see `writeStoppedCall`);
   * called in its turn of `serial`.
   */
  protected async writeEndingPause(callEnd: () => WriteOf<"set" | "journal">, othersInFlight: () => boolean): Promise<void> {
    if (this.run.status === "pausing" && !othersInFlight() && !this.resources.releasesOnPause(this.run.resources)) {
      const call = callEnd();
      const paused = this.pausedUpdate();
      const finished = await this.write({ ...call, ...paused, set: { ...call.set, ...paused.set }, journal: [...call.journal, ...paused.journal] });
      if (finished) return;
    }
    await this.write(callEnd());
  }

  /**
   * Writes `update` (built from the current record) and moves the run from `running` to
   * `pausing` for `reason` in the same write: an error that needs a person (a model error, a tool
   * whose server is gone, too many failures in a row, an effect nobody can vouch for). The move
   * expects `running` as stored, so a cancel, halt or pause that another process wrote meanwhile,
   * which this worker may not have seen yet, is never written over: false, with nothing written,
   * when the run is not running (this worker then knows it as it is), and the caller writes its
   * update alone. Called in its turn of `serial`.
   */
  protected async writePausing(update: () => WriteOf<"journal">, reason: string): Promise<boolean> {
    if (this.run.status !== "running") return false;
    const call = update();
    return this.write({
      ...call,
      expect: { ...call.expect, status: ["running"] },
      set: { ...call.set, status: "pausing", statusReason: reason, pauseMode: "immediate" },
      journal: [...call.journal, statusEntry(this.now(), "running", "pausing", reason)],
    });
  }

  protected async leaveHalted(): Promise<void> {
    await this.releaseResources(true);
    await this.write({ set: { lease: null, waitingFor: null, ...this.leavingRunning() } });
    this.letGoAt = this.run.version;
  }

  protected async complete(output: Json): Promise<boolean> {
    await this.releaseResources(false);
    return this.write({
      expect: { status: ["running"] },
      set: { status: "completed", output, lease: null, ...this.leavingRunning() },
      journal: [statusEntry(this.now(), "running", "completed")],
    });
  }

  protected async fail(code: string, message: string): Promise<void> {
    await this.releaseResources(false).catch(() => undefined);
    const from = this.run.status;
    if (from !== "running" && from !== "pausing") {
      // A cancel (or a halt) is not failed by an error here: give up the lease so a worker
      // takes the run again at once instead of after the lease runs out.
      await this.write({ set: { lease: null }, journal: [{ type: "recovery", at: this.now(), data: { problem: message, status: from } }] });
      return;
    }
    await this.write({
      expect: { status: [from] },
      set: { status: "failed", error: { code, message }, statusReason: code, lease: null, inflight: null, ...this.leavingRunning() },
      journal: [statusEntry(this.now(), from, "failed", code, { message })],
      settleCommands: { at: this.now(), outcomes: { pause: "superseded: failed" } },
    });
  }

  private async failUnexpectedly(error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    if (TetherError.isInstance(error) && error.code === "store_error" && this.mayLetGoAfterStoreError()) {
      await this.letGoAfterStoreError(message);
      return;
    }
    try {
      await this.fail(TetherError.isInstance(error) ? error.code : "internal_error", message);
    } catch {
      // The store is unreachable: the lease expires and another worker recovers the run.
    }
  }

  /**
   * A write the store refused (a connection reset, a deadlock, a database busy past its timeout)
   * says nothing about the run: the run is let go as it is stored, for a worker (this one's next
   * poll, or another) to take again and recover, each call in flight as its tool declared
   * (re-issued, checked, or uncertain). Failing the run would end it with its last call's effect
   * unrecorded, and a cancel could no longer undo it. The lease is given up when the store takes
   * the write; when not, it runs out. Nothing of this executor writes the run after.
   */
  private async letGoAfterStoreError(problem: string): Promise<void> {
    try {
      await this.write({ set: { lease: null, waitingFor: null }, journal: [{ type: "recovery", at: this.now(), data: { problem, status: this.run.status } }] });
      this.letGoForRecovery = true;
    } catch {
      // The store is unreachable: the lease runs out instead.
    }
    this.detached = true;
    this.stopAll.abort("store_error");
  }

  /** Let go after a store error with its lease given up: this process takes it again soon, worker or not. */
  letGoForRecovery = false;

  /**
   * Whether a run may be let go after a store error once more: not when this process let it go
   * that way `maxStoreErrorLetGos` times in the last `storeErrorWindowMs` (a write the store
   * refuses every time, not a passing fault), which fails the run as any other error does.
   */
  private mayLetGoAfterStoreError(): boolean {
    let byRun = storeErrorLetGos.get(this.ctx);
    if (!byRun) storeErrorLetGos.set(this.ctx, (byRun = new Map()));
    const now = this.now();
    const recent = (byRun.get(this.run.id) ?? []).filter((at) => now - at < storeErrorWindowMs);
    if (recent.length >= maxStoreErrorLetGos) {
      byRun.delete(this.run.id);
      return false;
    }
    byRun.set(this.run.id, [...recent, now]);
    return true;
  }

  /** How to undo a completed effect: by default its tool's `compensate`, found by name. */
  protected compensatorFor(effect: EffectRecord): Compensator | undefined {
    const tool = this.agent.tools?.find((t) => t.name === effect.tool);
    return tool?.compensate ? (input, result, ctx) => tool.compensate!(input, result, ctx) : undefined;
  }

  protected async cancel(): Promise<void> {
    await runCancellation({
      ctx: this.ctx,
      runId: this.run.id,
      current: () => this.run,
      write: (update) => this.write(update),
      compensator: (effect) => this.compensatorFor(effect),
      releaseResources: () => this.releaseResources(false),
      compensationResource: (name) => this.resources.peek(name),
      leavingRunning: () => this.leavingRunning(),
      stopSignal: this.stopAll.signal,
    });
  }
}
