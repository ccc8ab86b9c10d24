import type { AgentDefinition } from "./agent.js";
import { describeShape } from "./input-shape.js";
import { redactingStore, type SecretRedactor } from "./secrets.js";
import type { ApprovalDecisionInput } from "./approval.js";
import { approveCall, expireAllApprovals, expireRunApprovals, rejectCall } from "./approval-commands.js";
import { ApprovalDeadlines, type ApprovalDeadlineOptions } from "./approval-deadlines.js";
import { defaultBudgets, type Budgets } from "./budgets.js";
import { cancelRun, previewCancel, type CancelOptions, type CancelPreview } from "./cancel-command.js";
import { RunClaims } from "./claiming.js";
import { systemClock, type Clock } from "./clock.js";
import { getRun, hasLiveLease, type ControlHost, type ControlOptions } from "./control-command.js";
import { editPausedRun, sayToRun } from "./edit-command.js";
import type { CompensationPolicy, EngineContext, ModelResolver } from "./engine-context.js";
import { IllegalTransitionError, InvalidInputError, RunNotFoundError, TetherError, UnknownAgentError, VersionMismatchError } from "./errors.js";
import { inheritedAtStep } from "./fork-inheritance.js";
import { EventBus, type RunEvent } from "./events.js";
import { haltRuns, unhaltRuns, type HaltResult, type UnhaltResult } from "./halt-command.js";
import { maxLeaseMs, type ProcessProbe } from "./lease-holder.js";
import { RunWatcher } from "./run-watcher.js";
import { randomIds, type IdGenerator } from "./ids.js";
import type { Json } from "./json.js";
import { pauseRun, type PauseOptions } from "./pause-command.js";
import { PriceTable } from "./pricing.js";
import { resumeRun, type ResumeOptions } from "./resume-command.js";
import { subscribeRun, waitForRun } from "./run-subscription.js";
import { restoreState, SnapshotWriter } from "./snapshot.js";
import type { RunStatus } from "./status.js";
import type { ApprovalRequest, CommandRecord, DamagedRun, EffectRecord, JournalEntry, JournalInput, PruneOptions, PruneReport, RunFilter, RunRecord, RunStorage, SteeringMessage, Store } from "./store.js";
import type { AgentState } from "./state.js";
import { versionCompatible } from "./version-pin.js";
import { createdSnapshot, SnapshotHandoff } from "./snapshot-handoff.js";
import { statusEntry } from "./status-entry.js";

export type { CancelOptions, CancelPreview } from "./cancel-command.js";
export type { ControlOptions } from "./control-command.js";
export type { PauseOptions } from "./pause-command.js";
export type { ResumeOptions } from "./resume-command.js";

export interface RuntimeOptions {
  store: Store;
  agents: readonly AgentDefinition[];
  resolveModel: ModelResolver;
  clock?: Clock;
  ids?: IdGenerator;
  prices?: PriceTable;
  /** Identifies this process's worker in leases. */
  workerId?: string;
  /** Execute runs in this process (default true). A control-only client sets false. */
  worker?: boolean;
  /** How long a claimed run stays this worker's without a renewal; another worker takes it over after. Default 5000. */
  leaseMs?: number;
  /**
   * Names this process in the leases it takes and tells whether another lease's process has
   * exited (`ProcessProbe`). With it, a run whose holder was a process on this host that is gone
   * is taken back at once, not when its lease runs out. `createTether` and the CLI pass the local
   * probe (host, pid, a nonce per process); without it only leases that ran out free a run.
   */
  processProbe?: ProcessProbe;
  /**
   * Take back, without `startWorker()`, runs a process that died left active (running, pausing,
   * cancelling): at start (at once for a holder the probe says is gone) and every `leaseMs` for
   * leases that ran out. Queued runs still wait for `startWorker()`. Default false here, true
   * with `createTether`; `startWorker()` does the same look at start.
   */
  recoverOrphans?: boolean;
  /**
   * How often this process checks every run it executes for commands from other processes when
   * the store cannot tell it which runs changed. Default 10 ms. With a store that can (SQLite,
   * PostgreSQL) commands arrive as they are written, and the check is a safety net every
   * `controlCheckMs`.
   */
  controlPollMs?: number;
  /** The safety-net check when the store reports changes itself. Default 1000 ms. */
  controlCheckMs?: number;
  /** Runs this process executes at once; more wait, queued, in the store for any worker. Default 200. */
  concurrency?: number;
  /**
   * Retention: a worker deletes terminal runs (completed, failed, cancelled) last updated more
   * than `olderThanMs` ago, with their journals, every `everyMs` (default an hour), in batches.
   * Off by default.
   */
  retention?: { olderThanMs: number; everyMs?: number; batchSize?: number };
  /** How often the worker looks for queued or orphaned runs. */
  workerPollMs?: number;
  /** How a worker notices approvals whose deadline passed (`approvalTtlMs`): checked every second, paused runs rescanned every minute. */
  approvalDeadlines?: ApprovalDeadlineOptions;
  compensation?: Partial<CompensationPolicy>;
  /** Known secret values to keep out of everything stored or sent (createTether fills it from the environment). */
  redactor?: SecretRedactor;
}

export interface ForkOptions {
  /** The step of the source run to start from (its snapshot at that step). */
  fromStep: number;
  actor?: string;
  /** Move a run started under another, incompatible version of the agent onto this process's version (otherwise `version_mismatch`). */
  currentVersion?: boolean;
}

export interface StartOptions {
  owner?: string;
  budgets?: Budgets;
  model?: string;
}
/**
 * The runtime: starts runs, executes them (as a worker), and applies control commands from
 * this process. Any number of runtimes may share one store; commands reach the process that
 * executes a run through the store. Each command is in its own file (`pause-command.ts`,
 * `resume-command.ts`, …), claiming in `claiming.ts`, subscriptions in `run-subscription.ts`.
 */
export class Runtime {
  readonly store: Store;
  readonly bus = new EventBus();
  private readonly ctx: EngineContext;
  private readonly agentMap: Map<string, AgentDefinition>;
  private readonly isWorker: boolean;
  private readonly workerPollMs: number;
  private workerTimer: NodeJS.Timeout | undefined;
  private readonly approvalDeadlines: ApprovalDeadlines;
  private closed = false;
  private readonly watcher: RunWatcher;
  private readonly claims: RunClaims;
  private readonly retention: RuntimeOptions["retention"];
  private retentionTimer: NodeJS.Timeout | undefined;
  private orphanTimer: NodeJS.Timeout | undefined;
  private orphanFirstLook: NodeJS.Timeout | undefined;
  /** What the control commands need of this runtime. */
  private readonly host: ControlHost;

  constructor(options: RuntimeOptions) {
    if (options.leaseMs !== undefined && !(Number.isFinite(options.leaseMs) && options.leaseMs > 0 && options.leaseMs <= maxLeaseMs)) {
      throw new InvalidInputError(`leaseMs must be a number of milliseconds above 0 and at most ${maxLeaseMs} (a day), not ${options.leaseMs}: a dead worker's runs wait that long for another`);
    }
    const redactor = options.redactor;
    this.store = redactor ? redactingStore(options.store, redactor) : options.store;
    this.agentMap = new Map(options.agents.map((a) => [a.name, a]));
    this.isWorker = options.worker ?? true;
    this.workerPollMs = options.workerPollMs ?? 100;
    const ids = options.ids ?? randomIds;
    this.ctx = {
      store: this.store,
      clock: options.clock ?? systemClock,
      ids,
      bus: this.bus,
      prices: options.prices ?? new PriceTable(),
      resolveModel: options.resolveModel,
      agents: this.agentMap,
      workerId: options.workerId ?? ids("worker"),
      leaseMs: options.leaseMs ?? 5_000,
      processProbe: options.processProbe,
      controlPollMs: options.controlPollMs ?? 10,
      compensation: { maxAttempts: 3, backoffMs: 100, timeoutMs: 30_000, ...options.compensation },
      snapshots: new SnapshotHandoff(),
      redact: redactor && !redactor.empty ? (text) => redactor.text(text) : (text) => text,
      approvalDeadline: (runId, at) => this.approvalDeadlines.note(runId, at),
    };
    this.retention = options.retention;
    const ctx = this.ctx;
    this.watcher = new RunWatcher({
      store: this.store,
      now: () => ctx.clock.now(),
      checkMs: this.store.watchRuns ? (options.controlCheckMs ?? 1000) : ctx.controlPollMs,
      renewCheckMs: Math.max(5, Math.floor(ctx.leaseMs / 6)),
    });
    this.claims = new RunClaims(ctx, this.watcher, Math.max(1, Math.floor(options.concurrency ?? 200)), {
      closed: () => this.closed,
      polling: () => this.workerTimer !== undefined,
    });
    this.host = {
      ctx,
      executorOf: (runId) => this.claims.executors.get(runId)?.executor,
      isHeld: (run, now) => hasLiveLease(run, now) || this.claims.executors.has(run.id),
      claims: () => this.isWorker && !this.closed,
      claimSoon: (run) => this.claims.claimSoon(run),
      claimInline: (run, now) => (this.isWorker && !this.closed ? this.claims.inlineClaim(run, now) : undefined),
      inlineClaimSettled: (runId, run) => this.claims.inlineClaimSettled(runId, run),
      waitFor: (runId, predicate, waitOptions) => this.waitFor(runId, predicate, waitOptions),
    };
    this.approvalDeadlines = new ApprovalDeadlines(this.ctx, (runId) => expireRunApprovals(this.host, runId), options.approvalDeadlines);
    if (this.isWorker && options.recoverOrphans) this.startOrphanRecovery();
  }

  /** Runs left by a dead process go on here without `startWorker()` (`recoverOrphans`). */
  private startOrphanRecovery(): void {
    this.orphanFirstLook = setTimeout(() => void this.claims.recoverOrphans({ scanLeases: true }), 0);
    this.orphanFirstLook.unref?.();
    this.orphanTimer = setInterval(() => void this.claims.recoverOrphans({ scanLeases: false }), this.ctx.leaseMs);
    this.orphanTimer.unref?.();
  }

  /** Runs this process executes at once. */
  get concurrency(): number {
    return this.claims.concurrency;
  }

  get leaseMs(): number {
    return this.ctx.leaseMs;
  }

  get workerId(): string {
    return this.ctx.workerId;
  }

  get clock(): Clock {
    return this.ctx.clock;
  }

  get prices(): PriceTable {
    return this.ctx.prices;
  }

  agents(): AgentDefinition[] {
    return [...this.agentMap.values()];
  }

  /** Looks for queued and orphaned runs every `workerPollMs` and executes them here. */
  startWorker(): void {
    if (!this.isWorker || this.workerTimer || this.closed) return;
    this.workerTimer = setInterval(() => this.claims.claimSoonAvailable(), this.workerPollMs);
    this.workerTimer.unref?.();
    // Runs whose holder died on this host (a restart of this very worker) first, without waiting out their leases.
    void this.claims.recoverOrphans({ scanLeases: true });
    this.claims.claimSoonAvailable();
    this.approvalDeadlines.start();
    if (this.retention) {
      const retention = this.retention;
      this.retentionTimer = setInterval(
        () => void this.prune({ before: this.ctx.clock.now() - retention.olderThanMs, batchSize: retention.batchSize }).catch(() => undefined),
        retention.everyMs ?? 3_600_000,
      );
      this.retentionTimer.unref?.();
    }
  }

  /** What a run takes in the store. */
  async storage(runId: string): Promise<RunStorage> {
    const storage = await this.store.runStorage(runId);
    if (!storage) throw new RunNotFoundError(runId);
    return storage;
  }

  /**
   * Deletes terminal runs (completed, failed, cancelled) last updated before `before` (or more than
   * `olderThanMs` ago), with everything they own, in batches that let running work go on; never a
   * run that is not terminal.
   */
  prune(options: Omit<PruneOptions, "before"> & { before?: number; olderThanMs?: number }): Promise<PruneReport> {
    const before = options.before ?? (options.olderThanMs === undefined ? Number.NaN : this.clock.now() - options.olderThanMs);
    if (!Number.isFinite(before)) throw new TetherError("invalid_input", "prune needs a time bound (before, or olderThanMs): terminal runs last updated before it are removed");
    return this.store.prune({ before, dryRun: options.dryRun, batchSize: options.batchSize });
  }

  stopWorker(): void {
    clearInterval(this.workerTimer);
    this.workerTimer = undefined;
    this.approvalDeadlines.stop();
    clearInterval(this.retentionTimer);
    this.retentionTimer = undefined;
  }

  /**
   * Stops this process's work: its calls in flight are aborted, and no run is changed: their
   * leases lapse and any worker recovers them, as after a crash. With `releaseLeases` (a worker
   * stopped on purpose: `tether worker` and `serve` on SIGTERM or Ctrl-C) the runs it executed
   * are let go at once instead, so another worker takes them over without waiting out the lease
   * (and recovers their calls in flight by the same rules).
   */
  async close(options: { releaseLeases?: boolean } = {}): Promise<void> {
    this.closed = true;
    this.stopWorker();
    clearInterval(this.orphanTimer);
    clearTimeout(this.orphanFirstLook);
    // A look for orphaned runs under way may still claim one: its executor is then detached below.
    await this.claims.recovery;
    const executors = this.claims.executors;
    await Promise.allSettled([...this.claims.checking.values()]);
    const held = [...executors.values()].map(({ executor }) => executor.current);
    for (const { executor } of executors.values()) executor.detach();
    await Promise.allSettled([...executors.values()].map((e) => e.done));
    await this.claims.abandonHeldResources();
    if (options.releaseLeases) await this.releaseLeases(held);
  }

  /**
   * Ends now the leases of the runs this process let go, each only at the epoch it held (a run
   * another worker took meanwhile, or that ended or paused, is left as it is): the lease keeps its
   * holder, so the worker that takes the run over names it in the `recovery` entry, as after a
   * crash, and the run reads as waiting for a worker from this moment. Best effort: a lease not
   * ended here runs out by itself.
   */
  private async releaseLeases(runs: readonly RunRecord[]): Promise<void> {
    const now = this.clock.now();
    const mine = runs.filter((run) => run.lease?.workerId === this.ctx.workerId);
    await Promise.allSettled(
      mine.map((run) =>
        this.store.update({ runId: run.id, expect: { epoch: run.epoch, status: ["running", "pausing", "cancelling"] }, set: { lease: { ...run.lease!, until: now } } }),
      ),
    );
  }

  get(runId: string): Promise<RunRecord> {
    return getRun(this.ctx, runId);
  }

  /** The runs that match, newest first; a run whose record is damaged is passed over and named in `damaged` when given (see `Store.listRuns`). */
  list(filter?: RunFilter, damaged?: DamagedRun[]): Promise<RunRecord[]> {
    return this.store.listRuns(filter, damaged);
  }

  /** Journal entries after seq `after` (default: from the start), at most `limit`; `TetherClient.journal` takes the same options. */
  async journal(runId: string, options: { after?: number; limit?: number; /** @deprecated Use `after`. */ afterSeq?: number } = {}): Promise<JournalEntry[]> {
    await this.get(runId);
    return this.store.readJournal(runId, { afterSeq: options.after ?? options.afterSeq, limit: options.limit });
  }

  /** The verified state at the latest snapshot (or at a step). */
  async state(runId: string, options: { atStep?: number } = {}): Promise<AgentState> {
    await this.get(runId);
    return restoreState(runId, await this.store.loadState(runId, options)).state;
  }

  async effects(runId: string): Promise<EffectRecord[]> {
    await this.get(runId);
    return this.store.listEffects(runId);
  }

  async commands(runId: string): Promise<CommandRecord[]> {
    await this.get(runId);
    return this.store.listCommands(runId);
  }

  private agentFor(name: string): AgentDefinition {
    const agent = this.agentMap.get(name);
    if (!agent) throw new UnknownAgentError(name, [...this.agentMap.keys()]);
    return agent;
  }

  async start(agentName: string, input: Json, options: StartOptions = {}): Promise<RunRecord> {
    const agent = this.agentFor(agentName);
    let checkedInput = input;
    if (agent.input) {
      const parsed = agent.input.safeParse(input);
      if (!parsed.success) {
        const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(input)"}: ${i.message}`).join("; ");
        throw new InvalidInputError(`invalid input for agent ${agentName}: ${problems}. It takes: ${describeShape(agent.input)}`, parsed.error.issues);
      }
      checkedInput = parsed.data;
    }
    if (options.model !== undefined) this.ctx.resolveModel(options.model);
    const now = this.ctx.clock.now();
    const state = agent.init(checkedInput);
    const { write } = SnapshotWriter.forNewRun(state, now);
    const id = this.ctx.ids("run");
    const owner = options.owner ?? "local";
    // A worker with room creates the run claimed, and executes it at once.
    const claim = this.isWorker && !this.closed ? this.claims.claimNew(id, agent.name, now) : undefined;
    const created: JournalInput[] = [{ type: "run.created", at: now, data: { agent: agent.name, version: agent.version, owner } }];
    if (claim) created.push(statusEntry(now, "queued", "running"));
    let run: RunRecord;
    try {
      run = await this.store.createRun(
        {
          id,
          agent: agent.name,
          agentVersion: agent.version,
          owner,
          status: claim ? "running" : "queued",
          input: checkedInput,
          model: options.model ?? null,
          budgets: { ...defaultBudgets, ...agent.budgets, ...options.budgets },
          forkedFrom: null,
          step: 0,
          createdAt: now,
          // A halt refuses the start (`halted`) in the creation's own write.
          refuseIfHalted: true,
          ...(claim ? { claim } : {}),
        },
        write,
        created,
      );
    } catch (error) {
      if (claim) this.claims.createdClaimed(id);
      throw error;
    }
    this.publishCreated(id, created);
    if (claim) {
      this.ctx.snapshots.offer(id, createdSnapshot(run, write), write.head.chain);
      this.claims.createdClaimed(id, run);
    } else if (this.isWorker && !this.closed) this.claims.claimSoon(run);
    return run;
  }

  /** A new run's first entries, as the store numbered them (1, 2, …): no need to read them back. */
  private publishCreated(runId: string, entries: readonly JournalInput[]): void {
    this.bus.publishJournal(entries.map((entry, index) => ({ ...entry, runId, seq: index + 1 })));
  }

  /**
   * A new run from a step of this one, executed by this process's version of the agent. A run
   * started under a version this one is not compatible with (`compatibleWith`) forks only with
   * `currentVersion: true`, the person's choice to move its state onto this version.
   */
  async fork(runId: string, options: ForkOptions): Promise<RunRecord> {
    const source = await this.get(runId);
    // A fork inherits the effects its source completed up to its step. A cancel decided whether
    // to undo them when no fork existed; one made while they are being undone, or after, would
    // rely on effects that are gone.
    if (source.status === "cancelling") {
      throw new IllegalTransitionError(runId, "fork", "cancelling", "its effects are being undone; fork it once cancelled, from step 0, or fork before cancelling (a cancel then asks what to do with the effects a live fork inherited)");
    }
    if (source.status === "cancelled" && Number.isInteger(options.fromStep) && options.fromStep >= 0 && options.fromStep <= source.step) {
      const undone = (await this.store.listEffects(runId)).filter((e) => e.state === "compensated");
      const inherited = await inheritedAtStep(this.ctx, runId, options.fromStep, undone);
      if (inherited.length > 0) {
        throw new IllegalTransitionError(runId, "fork", "cancelled", `its cancel undid effects a fork from step ${options.fromStep} would believe done (${inherited.map((e) => `${e.tool} #${e.callSeq}`).join(", ")}); fork it from a step before them`);
      }
    }
    const agent = this.agentFor(source.agent);
    const moved = source.agentVersion !== agent.version;
    if (!options.currentVersion && !versionCompatible(agent, source.agentVersion)) throw new VersionMismatchError(runId, agent.name, source.agentVersion, agent.version, "fork");
    if (!Number.isInteger(options.fromStep) || options.fromStep < 0 || options.fromStep > source.step) {
      throw new InvalidInputError(`fromStep must be a completed step of run ${runId}: an integer from 0 to ${source.step}`);
    }
    const { state } = restoreState(runId, await this.store.loadState(runId, { atStep: options.fromStep }));
    const now = this.ctx.clock.now();
    const { write } = SnapshotWriter.forNewRun(state, now, options.fromStep);
    const id = this.ctx.ids("run");
    const actor = options.actor ?? "local";
    const created: JournalInput[] = [
      { type: "run.created", at: now, data: { agent: agent.name, version: agent.version, owner: actor, forkedFrom: runId, fromStep: options.fromStep, ...(moved ? { fromVersion: source.agentVersion } : {}) } },
    ];
    const run = await this.store.createRun(
      {
        id,
        agent: agent.name,
        agentVersion: agent.version,
        owner: actor,
        status: "queued",
        input: source.input,
        model: source.model,
        budgets: source.budgets,
        forkedFrom: { runId, step: options.fromStep },
        step: options.fromStep,
        createdAt: now,
        refuseIfHalted: true,
      },
      write,
      created,
    );
    this.publishCreated(id, created);
    if (this.isWorker && !this.closed) this.claims.claimSoon(run);
    return run;
  }

  async pause(runId: string, options: PauseOptions = {}): Promise<RunRecord> {
    return pauseRun(this.host, runId, options);
  }

  async resume(runId: string, options: ResumeOptions = {}): Promise<RunRecord> {
    return resumeRun(this.host, runId, options);
  }

  /**
   * Sends a message to a run without pausing it: journaled now, received by the agent as a user
   * message before its next model call. A paused run receives it when it resumes.
   */
  async say(runId: string, text: string, options: { actor?: string } = {}): Promise<{ run: RunRecord; message: SteeringMessage }> {
    return sayToRun(this.host, runId, text, options.actor ?? "local");
  }

  /**
   * Approves a call waiting for approval (`callSeq`; without it, every call waiting): it runs once,
   * with `input` instead of the proposed arguments if given. Once no call waits any more, the run
   * continues (in whichever process executes runs).
   */
  async approve(runId: string, options: ApprovalDecisionInput = {}): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
    return approveCall(this.host, runId, options);
  }

  /** Rejects a call waiting for approval (`callSeq`; without it, every call waiting): the agent receives `note` as the call's result. */
  async reject(runId: string, options: ApprovalDecisionInput & { note: string }): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
    return rejectCall(this.host, runId, options);
  }

  /**
   * Applies every approval deadline that has passed (`approvalTtlMs` and `onApprovalTimeout`),
   * reading every paused run; a worker does it on its own (approval-deadlines.ts). Returns the runs it changed.
   */
  async expireApprovals(): Promise<RunRecord[]> {
    return expireAllApprovals(this.host);
  }

  /** Adds a message or applies a state patch to a paused run, without resuming it (`POST /runs/:id/state`). */
  async editState(runId: string, edits: { message?: string; patch?: unknown; actor?: string }): Promise<RunRecord> {
    return editPausedRun(this.host, runId, edits);
  }

  /** @deprecated Renamed `editState`, the name `TetherClient` has too. */
  editPaused(runId: string, edits: { message?: string; patch?: unknown; actor?: string }): Promise<RunRecord> {
    return this.editState(runId, edits);
  }

  /**
   * Cancels the run: it stops, then its effects are compensated newest first. When a live fork
   * inherited some of them, say `inherited: "compensate"` or `"keep"` (otherwise `fork_inherits_effects`).
   */
  async cancel(runId: string, options: CancelOptions = {}): Promise<RunRecord> {
    return cancelRun(this.host, runId, options);
  }

  /** What a cancel would do now: compensations newest first and the resources to release. */
  async cancelPreview(runId: string): Promise<CancelPreview> {
    return previewCancel(this.host, runId);
  }

  /** The kill switch: every run in scope halted at once, in-flight calls aborted, no compensation. */
  async halt(options: ControlOptions & { agent?: string } = {}): Promise<HaltResult> {
    return haltRuns(this.host, options);
  }

  /** Lifts the halt: halted runs become paused, and their owners decide what next. */
  async unhalt(options: ControlOptions & { agent?: string } = {}): Promise<UnhaltResult> {
    return unhaltRuns(this.host, options);
  }

  halts() {
    return this.store.listHalts();
  }

  /**
   * The run's events from `afterSeq`: the journal's history first, then live, with no gap and
   * no duplicate (run-subscription.ts).
   */
  subscribe(runId: string, options: { afterSeq?: number; pollMs?: number }, listener: (event: RunEvent) => void): () => void {
    return subscribeRun(this.ctx, (id) => this.claims.executors.has(id), runId, options, listener);
  }

  /** Resolves with the run once `predicate` holds (checked on every event and every poll). */
  async waitFor(runId: string, predicate: ((run: RunRecord) => boolean) | readonly RunStatus[], options: { timeoutMs?: number } = {}): Promise<RunRecord> {
    return waitForRun(this.ctx, (id) => this.claims.executors.get(id)?.executor.current, runId, predicate, options);
  }

  /** How many runs this process is executing now (at most `concurrency`). */
  get executingCount(): number {
    return this.claims.executors.size;
  }

  isExecuting(runId: string): boolean {
    return this.claims.executors.has(runId);
  }

  /** Waits until this process is no longer executing the run. */
  async settled(runId: string): Promise<void> {
    await this.claims.checking.get(runId);
    await this.claims.executors.get(runId)?.done;
  }
}

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}
