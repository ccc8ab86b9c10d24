import type { AgentDefinition } from "./agent.js";
import { describeShape } from "./input-shape.js";
import { redactingStore, type SecretRedactor } from "./secrets.js";
import { sendMessage } from "./steering.js";
import { decideApproval, expireApprovals, nextApprovalDeadline, undecided, type ApprovalDecisionInput } from "./approval.js";
import { ApprovalDeadlines, type ApprovalDeadlineOptions } from "./approval-deadlines.js";
import { defaultBudgets, trippedBudget, type Budgets } from "./budgets.js";
import { systemClock, type Clock } from "./clock.js";
import { pendingCompensations } from "./compensation.js";
import type { CompensationPolicy, EngineContext, ModelResolver } from "./engine-context.js";
import {
  HaltedError,
  BudgetExceededError,
  AlreadyDecidedError,
  ApprovalPendingError,
  IllegalTransitionError,
  RunHaltedError,
  InvalidInputError,
  RunNotFoundError,
  StaleSnapshotError,
  TetherError,
  UncertainEffectError,
  UnknownAgentError,
  WaitTimeoutError,
} from "./errors.js";
import { EventBus, type RunEvent } from "./events.js";
import { RunWatcher } from "./run-watcher.js";
import { statusEntry } from "./executor.js";
import { createExecutor } from "./executors.js";
import type { RunSession } from "./run-session.js";
import type { ResourceHolder } from "./resources.js";
import { randomIds, type IdGenerator } from "./ids.js";
import type { Json, JsonObject } from "./json.js";
import { settlePendingCommands } from "./pending-commands.js";
import { PriceTable } from "./pricing.js";
import { restoreState, SnapshotWriter } from "./snapshot.js";
import { applyStatePatch, validateMessage } from "./state-edits.js";
import { isTerminal, type ControlCommandType, type RunStatus } from "./status.js";
import type { ApprovalRequest, CommandRecord, EffectRecord, JournalEntry, JournalInput, PruneOptions, PruneReport, RunFilter, RunRecord, RunStorage, RunUpdate, SteeringMessage, Store, UpdateResult } from "./store.js";
import type { AgentState } from "./state.js";

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

export interface ControlOptions {
  actor?: string;
  reason?: string;
}

export interface PauseOptions extends ControlOptions {
  /** "immediate" (default) aborts an in-flight model call; "boundary" lets it finish. */
  mode?: "immediate" | "boundary";
  /**
   * Resolve once the run is `paused` (or has ended otherwise: halted, cancelled, completed,
   * failed) instead of as soon as the command is recorded, when it may still be `pausing`
   * while a call that cannot be interrupted finishes. Default false.
   */
  wait?: boolean;
  /** With `wait`: give up after this long with `wait_timeout`. Default 120 s. */
  timeoutMs?: number;
}

export interface ResumeOptions extends ControlOptions {
  message?: string;
  patch?: unknown;
  force?: boolean;
  /**
   * A person's decision on an uncertain effect: `retry` it, `skip` it, or say it is `done`, which
   * needs the result it had (`result`) or an explicit `noResult: true`. A decision is final.
   */
  resolve?: { action: "retry" | "skip" | "done"; result?: Json; noResult?: boolean };
  budgets?: Budgets;
}

export interface StartOptions {
  owner?: string;
  budgets?: Budgets;
  model?: string;
}

export interface CancelPreview {
  runId: string;
  status: RunStatus;
  /** Whether a cancel would apply at all: false for a run that has ended (and everything below is empty). */
  cancellable: boolean;
  compensations: { callSeq: number; tool: string; input: Json }[];
  resources: string[];
  uncertain: { callSeq: number; tool: string }[];
}

const activeStatuses: RunStatus[] = ["queued", "running", "pausing", "paused", "cancelling", "halted"];

function hasLiveLease(run: RunRecord, now: number): boolean {
  return run.lease !== null && run.lease.until >= now;
}

/**
 * The runtime: starts runs, executes them (as a worker), and applies control commands from
 * this process. Any number of runtimes may share one store; commands reach the process that
 * executes a run through the store.
 */
export class Runtime {
  readonly store: Store;
  readonly bus = new EventBus();
  private readonly ctx: EngineContext;
  private readonly agentMap: Map<string, AgentDefinition>;
  private readonly executors = new Map<string, { executor: RunSession; done: Promise<void> }>();
  private readonly resourceHolders = new Map<string, ResourceHolder>();
  private readonly isWorker: boolean;
  private readonly workerPollMs: number;
  private workerTimer: NodeJS.Timeout | undefined;
  private readonly approvalDeadlines: ApprovalDeadlines;
  private closed = false;
  private readonly watcher: RunWatcher;
  /** Runs this process executes at once. */
  readonly concurrency: number;
  private claiming: Promise<void> | undefined;
  private readonly retention: RuntimeOptions["retention"];
  private retentionTimer: NodeJS.Timeout | undefined;
  private claimAgain = false;

  constructor(options: RuntimeOptions) {
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
      controlPollMs: options.controlPollMs ?? 10,
      compensation: { maxAttempts: 3, backoffMs: 100, timeoutMs: 30_000, ...options.compensation },
      redact: redactor && !redactor.empty ? (text) => redactor.text(text) : (text) => text,
      approvalDeadline: (runId, at) => this.approvalDeadlines.note(runId, at),
    };
    this.concurrency = Math.max(1, Math.floor(options.concurrency ?? 200));
    this.retention = options.retention;
    this.approvalDeadlines = new ApprovalDeadlines(this.ctx, (runId) => this.expireRunApprovals(runId), options.approvalDeadlines);
    const ctx = this.ctx;
    this.watcher = new RunWatcher({
      store: this.store,
      now: () => ctx.clock.now(),
      checkMs: this.store.watchRuns ? (options.controlCheckMs ?? 1000) : ctx.controlPollMs,
      renewCheckMs: Math.max(5, Math.floor(ctx.leaseMs / 6)),
    });
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
    this.workerTimer = setInterval(() => this.claimSoonAvailable(), this.workerPollMs);
    this.workerTimer.unref?.();
    this.claimSoonAvailable();
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
   * Deletes terminal runs (completed, failed, cancelled) last updated before `before`, with
   * everything they own, in batches that let running work go on; never a run that is not terminal.
   */
  prune(options: PruneOptions): Promise<PruneReport> {
    if (!Number.isFinite(options.before)) throw new TetherError("invalid_input", "prune needs a time bound: terminal runs last updated before it are removed");
    return this.store.prune(options);
  }

  /** Looks for work now, unless a look is under way (then once more after it). */
  private claimSoonAvailable(): void {
    if (!this.workerTimer || this.closed) return;
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

  stopWorker(): void {
    clearInterval(this.workerTimer);
    this.workerTimer = undefined;
    this.approvalDeadlines.stop();
    clearInterval(this.retentionTimer);
    this.retentionTimer = undefined;
  }

  /** Stops this process's work without changing any run: their leases lapse and any worker recovers them. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopWorker();
    for (const { executor } of this.executors.values()) executor.detach();
    await Promise.allSettled([...this.executors.values()].map((e) => e.done));
  }

  async get(runId: string): Promise<RunRecord> {
    const run = await this.store.getRun(runId);
    if (!run) throw new RunNotFoundError(runId);
    return run;
  }

  list(filter?: RunFilter): Promise<RunRecord[]> {
    return this.store.listRuns(filter);
  }

  async journal(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<JournalEntry[]> {
    await this.get(runId);
    return this.store.readJournal(runId, options);
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

  /** A worker executes the run: its live lease, or this process even if a slow tick let the lease lapse. */
  private isHeld(run: RunRecord, now: number): boolean {
    return hasLiveLease(run, now) || this.executors.has(run.id);
  }

  private agentFor(name: string): AgentDefinition {
    const agent = this.agentMap.get(name);
    if (!agent) throw new UnknownAgentError(name, [...this.agentMap.keys()]);
    return agent;
  }

  private async haltFor(agent: string): Promise<string | undefined> {
    const halts = await this.store.listHalts();
    return halts.find((h) => h.scope === "*" || h.scope === `agent:${agent}`)?.scope;
  }

  async start(agentName: string, input: Json, options: StartOptions = {}): Promise<RunRecord> {
    const agent = this.agentFor(agentName);
    const halt = await this.haltFor(agentName);
    if (halt) throw new HaltedError(halt);
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
    const created: JournalInput[] = [{ type: "run.created", at: now, data: { agent: agent.name, version: agent.version, owner } }];
    const run = await this.store.createRun(
      {
        id,
        agent: agent.name,
        agentVersion: agent.version,
        owner,
        status: "queued",
        input: checkedInput,
        model: options.model ?? null,
        budgets: { ...defaultBudgets, ...agent.budgets, ...options.budgets },
        forkedFrom: null,
        step: 0,
        createdAt: now,
      },
      write,
      created,
    );
    this.publishCreated(id, created);
    if (this.isWorker && !this.closed) this.claimSoon(run);
    return run;
  }

  /** A new run's first entries, as the store numbered them (1, 2, …): no need to read them back. */
  private publishCreated(runId: string, entries: readonly JournalInput[]): void {
    this.bus.publishJournal(entries.map((entry, index) => ({ ...entry, runId, seq: index + 1 })));
  }

  async fork(runId: string, options: { fromStep: number; actor?: string }): Promise<RunRecord> {
    const source = await this.get(runId);
    const agent = this.agentFor(source.agent);
    const halt = await this.haltFor(agent.name);
    if (halt) throw new HaltedError(halt);
    if (!Number.isInteger(options.fromStep) || options.fromStep < 0 || options.fromStep > source.step) {
      throw new InvalidInputError(`fromStep must be a completed step of run ${runId}: an integer from 0 to ${source.step}`);
    }
    const { state } = restoreState(runId, await this.store.loadState(runId, { atStep: options.fromStep }));
    const now = this.ctx.clock.now();
    const { write } = SnapshotWriter.forNewRun(state, now, options.fromStep);
    const id = this.ctx.ids("run");
    const actor = options.actor ?? "local";
    const created: JournalInput[] = [
      { type: "run.created", at: now, data: { agent: agent.name, version: agent.version, owner: actor, forkedFrom: runId, fromStep: options.fromStep } },
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
      },
      write,
      created,
    );
    this.publishCreated(id, created);
    if (this.isWorker && !this.closed) this.claimSoon(run);
    return run;
  }

  private command(type: ControlCommandType, runId: string | null, options: ControlOptions, payload: JsonObject = {}): CommandRecord {
    return {
      id: this.ctx.ids("cmd"),
      runId,
      type,
      actor: options.actor ?? "local",
      reason: options.reason ?? null,
      payload,
      createdAt: this.ctx.clock.now(),
      appliedAt: null,
      outcome: null,
    };
  }

  private controlEntry(command: CommandRecord, outcome: string): JournalInput {
    return {
      type: "control",
      at: this.ctx.clock.now(),
      data: { command: command.type, commandId: command.id, actor: command.actor, reason: command.reason, outcome, ...command.payload },
    };
  }

  /** Records a command that changes nothing (it already holds) or is refused, in the journal too. */
  private async recordCommandOnly(run: RunRecord, command: CommandRecord, outcome: string): Promise<RunRecord> {
    const result = await this.store.update({
      runId: run.id,
      journal: [this.controlEntry(command, outcome)],
      insertCommand: { ...command, appliedAt: this.ctx.clock.now(), outcome },
    });
    if (result.ok) this.bus.publishJournal(result.journal);
    return result.run;
  }

  /** Applies a control update with optimistic concurrency: re-read and re-decide on conflict. */
  private async control(
    runId: string,
    command: CommandRecord,
    decide: (run: RunRecord, now: number) => Promise<{ update: Omit<RunUpdate, "runId" | "expect" | "insertCommand">; applied: boolean } | { noop: true } | { refuse: TetherError }>,
  ): Promise<RunRecord> {
    for (let attempt = 0; ; attempt++) {
      const run = await this.get(runId);
      const now = this.ctx.clock.now();
      const decision = await decide(run, now).catch((error: unknown) => {
        // A refusal found while deciding (a corrupt snapshot, an invalid patch) is recorded like any other.
        if (TetherError.isInstance(error)) return { refuse: error };
        throw error;
      });
      if ("noop" in decision) return this.recordCommandOnly(run, command, "already_holds");
      if ("refuse" in decision) {
        await this.recordCommandOnly(run, command, `refused: ${decision.refuse.code}`);
        throw decision.refuse;
      }
      const result = await this.store.update({
        ...decision.update,
        runId,
        // Edits of a paused run's state need the exact version; a status change only needs the
        // status and the fencing epoch it was decided on, so a busy executor does not starve it.
        expect: decision.update.snapshot ? { version: run.version } : { status: [run.status], epoch: run.epoch },
        journal: [this.controlEntry(command, decision.applied ? "applied" : "requested"), ...(decision.update.journal ?? [])],
        insertCommand: decision.applied ? { ...command, appliedAt: now, outcome: "applied" } : command,
      });
      if (!result.ok) {
        if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while applying ${command.type}`);
        continue;
      }
      this.bus.publishJournal(result.journal);
      this.executors.get(runId)?.executor.observe(result.run);
      return result.run;
    }
  }

  async pause(runId: string, options: PauseOptions = {}): Promise<RunRecord> {
    const recorded = await this.recordPause(runId, options);
    if (!options.wait || recorded.status !== "pausing") return recorded;
    return this.waitFor(runId, (run) => run.status !== "pausing" && run.status !== "running", { timeoutMs: options.timeoutMs ?? 120_000 });
  }

  private async recordPause(runId: string, options: PauseOptions): Promise<RunRecord> {
    const mode = options.mode ?? "immediate";
    const command = this.command("pause", runId, options, { mode });
    const reason = options.reason ?? `paused by ${command.actor}`;
    return this.control(runId, command, async (run, now) => {
      if (run.status === "pausing" || run.status === "paused") return { noop: true };
      if (run.status === "halted") return { refuse: new RunHaltedError(runId, "pause") };
      if (run.status !== "running") return { refuse: new IllegalTransitionError(runId, "pause", run.status) };
      if (this.isHeld(run, now)) {
        return { update: { set: { status: "pausing", statusReason: reason, pauseMode: mode }, journal: [statusEntry(now, "running", "pausing", reason)] }, applied: false };
      }
      // No worker holds it, so nothing is in flight: it is paused at once.
      const since = run.runningSince;
      return {
        update: {
          set: { status: "paused", statusReason: reason, pauseMode: null, runningSince: null, activeMs: run.activeMs + (since === null ? 0 : now - since) },
          journal: [statusEntry(now, "running", "pausing", reason), statusEntry(now, "pausing", "paused", reason)],
        },
        applied: true,
      };
    });
  }

  async resume(runId: string, options: ResumeOptions = {}): Promise<RunRecord> {
    const command = this.command("resume", runId, options, {
      ...(options.force ? { force: true } : {}),
      ...(options.message !== undefined ? { message: true } : {}),
      ...(options.patch !== undefined ? { patch: true } : {}),
      ...(options.resolve ? { resolve: options.resolve.action } : {}),
    });
    if (options.resolve?.action === "done" && options.resolve.result === undefined && !options.resolve.noResult) {
      throw new InvalidInputError(`resolving call as done needs the result the effect had (result), or an explicit noResult: true; the agent continues with it as the call's result`);
    }
    const run = await this.control(runId, command, async (current, now) => {
      const decided = current.inflight?.resolution;
      if (options.resolve && decided && current.inflight) return { refuse: new AlreadyDecidedError(runId, current.inflight.callSeq, decided.action, decided.actor) };
      if (options.resolve && !current.inflight?.uncertain) {
        // Decided, and the decision already carried out: the journal's recent entries say so.
        const recent = await this.store.readJournal(runId, { afterSeq: Math.max(0, current.journalSeq - 200), limit: 200 });
        const resolved = recent.findLast((e) => e.type === "call.resolved");
        if (resolved) return { refuse: new AlreadyDecidedError(runId, resolved.callSeq ?? 0, String(resolved.data.decision), String(resolved.data.actor)) };
      }
      if (current.status === "running" || current.status === "queued") return { noop: true };
      if (current.status === "pausing") {
        return { refuse: new IllegalTransitionError(runId, "resume", current.status, "a call that cannot be interrupted is finishing; wait until it is paused (pause(id, { wait: true }), waitFor(id, [\"paused\"]), or `tether pause`, which waits), then resume") };
      }
      if (current.status === "halted") return { refuse: new RunHaltedError(runId, "resume") };
      if (current.status !== "paused") return { refuse: new IllegalTransitionError(runId, "resume", current.status) };
      if (current.inflight?.uncertain && !options.resolve) return { refuse: new UncertainEffectError(runId, current.inflight.callSeq, current.inflight.name) };
      const awaiting = undecided(current);
      if (awaiting.length) return { refuse: new ApprovalPendingError(runId, awaiting.map((a) => ({ callSeq: a.callSeq, tool: a.tool }))) };
      const agent = this.agentMap.get(current.agent);
      const stored = await this.store.loadState(runId);
      let { state, writer } = restoreState(runId, stored);
      const journal: JournalInput[] = [];
      if (!options.force) {
        const reasons = await this.staleReasons(current, agent, now);
        if (reasons.length) {
          if (!agent?.onStale) return { refuse: new StaleSnapshotError(runId, reasons) };
          state = await agent.onStale(state, reasons);
          journal.push({ type: "state.patched", at: now, data: { actor: "onStale", reasons } });
        }
      }
      const edits = this.editState(agent, state, command.actor, { message: options.message, patch: options.patch }, now);
      journal.push(...edits.journal);
      if (options.resolve && !current.inflight?.uncertain) {
        return { refuse: new InvalidInputError(`run ${runId} has no uncertain effect to resolve`) };
      }
      // Paused by a budget it still exceeds: resuming would pause again at once, unless this command raises it.
      if (current.statusReason?.startsWith("budget_")) {
        const still = trippedBudget({ ...current.budgets, ...options.budgets }, { usage: current.usage, step: current.step, activeMs: current.activeMs, repeatedToolCalls: 0 });
        if (still) return { refuse: new BudgetExceededError(runId, still) };
      }
      const changed = journal.length > 0;
      return {
        update: {
          set: {
            status: "running",
            statusReason: null,
            lease: null,
            runningSince: now,
            ...(options.budgets ? { budgets: { ...current.budgets, ...options.budgets } } : {}),
            // A person looked at the repeated failures: the count starts again.
            ...(current.guard.failures ? { guard: { ...current.guard, failures: 0, recentFailures: [] } } : {}),
            ...(options.resolve && current.inflight
              ? { inflight: { ...current.inflight, resolution: { action: options.resolve.action, result: options.resolve.result ?? null, actor: command.actor } } }
              : {}),
          },
          journal: [...journal, statusEntry(now, "paused", "running", options.reason ?? null, { actor: command.actor })],
          ...(changed ? { snapshot: writer.prepare(edits.state, current.step, now) } : {}),
        },
        applied: true,
      };
    });
    if (run.status === "running" && this.isWorker && !this.closed) this.claimSoon(run);
    return run;
  }

  private editState(
    agent: AgentDefinition | undefined,
    state: AgentState,
    actor: string,
    edits: { message?: string; patch?: unknown },
    now: number,
  ): { state: AgentState; journal: JournalInput[] } {
    const journal: JournalInput[] = [];
    let next = state;
    if (edits.patch !== undefined) {
      const vars = applyStatePatch(agent, next, edits.patch);
      next = { messages: next.messages, vars };
      journal.push({ type: "state.patched", at: now, data: { actor, patch: edits.patch as Json } });
    }
    if (edits.message !== undefined) {
      const content = validateMessage(edits.message);
      next = { messages: [...next.messages, { role: "user", content, author: actor }], vars: next.vars };
      journal.push({ type: "state.message_added", at: now, data: { actor, content, index: next.messages.length - 1 } });
    }
    return { state: next, journal };
  }

  /**
   * Sends a message to a run without pausing it: journaled now, received by the agent as a user
   * message before its next model call. A paused run receives it when it resumes.
   */
  async say(runId: string, text: string, options: { actor?: string } = {}): Promise<{ run: RunRecord; message: SteeringMessage }> {
    const sent = await sendMessage(this.ctx, runId, text, options.actor ?? "local");
    // A run executing here hears of it at once; another process's through its control poll.
    this.executors.get(runId)?.executor.observe(sent.run);
    return sent;
  }

  /**
   * Approves a call waiting for approval (`callSeq`; without it, every call waiting): it runs once,
   * with `input` instead of the proposed arguments if given. Once no call waits any more, the run
   * continues (in whichever process executes runs).
   */
  async approve(runId: string, options: ApprovalDecisionInput = {}): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
    return this.decided(await decideApproval(this.ctx, runId, "approved", options, this.approvalStaleCheck));
  }

  /** Rejects a call waiting for approval (`callSeq`; without it, every call waiting): the agent receives `note` as the call's result. */
  async reject(runId: string, options: ApprovalDecisionInput & { note: string }): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
    return this.decided(await decideApproval(this.ctx, runId, "rejected", options, this.approvalStaleCheck));
  }

  /** The resume's stale check, for a run that continues once its approvals are decided. */
  private readonly approvalStaleCheck = (run: RunRecord, now: number): Promise<string[]> => this.staleReasons(run, this.agentMap.get(run.agent), now);

  private decided<T extends { run: RunRecord }>(outcome: T): T {
    if (outcome.run.status === "running" && this.isWorker && !this.closed) this.claimSoon(outcome.run);
    return outcome;
  }

  /**
   * Applies every approval deadline that has passed (`approvalTtlMs` and `onApprovalTimeout`),
   * reading every paused run; a worker does it on its own (approval-deadlines.ts). Returns the runs it changed.
   */
  async expireApprovals(): Promise<RunRecord[]> {
    const now = this.ctx.clock.now();
    const changed: RunRecord[] = [];
    for (const run of await this.store.listRuns({ status: ["paused", "pausing", "halted"], limit: 100_000 })) {
      const deadline = nextApprovalDeadline(run);
      if (deadline === undefined || deadline > now) continue;
      const after = await this.expireRunApprovals(run.id);
      if (after && after.version !== run.version) changed.push(after);
    }
    return changed;
  }

  private async expireRunApprovals(runId: string): Promise<RunRecord | undefined> {
    const after = await expireApprovals(this.ctx, runId, this.approvalStaleCheck);
    return after && this.decided({ run: after }).run;
  }

  /** Adds a message or applies a state patch to a paused run, without resuming it. */
  async editPaused(runId: string, edits: { message?: string; patch?: unknown; actor?: string }): Promise<RunRecord> {
    const actor = edits.actor ?? "local";
    for (let attempt = 0; ; attempt++) {
      if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while its state was being edited`);
      const run = await this.get(runId);
      if (run.status !== "paused") throw new IllegalTransitionError(runId, "edit the state of", run.status);
      const now = this.ctx.clock.now();
      const { state, writer } = restoreState(runId, await this.store.loadState(runId));
      const result = this.editState(this.agentMap.get(run.agent), state, actor, edits, now);
      if (!result.journal.length) return run;
      const update = await this.store.update({
        runId,
        expect: { version: run.version, status: ["paused"] },
        journal: result.journal,
        snapshot: writer.prepare(result.state, run.step, now),
      });
      if (update.ok) {
        this.bus.publishJournal(update.journal);
        return update.run;
      }
    }
  }

  private async staleReasons(run: RunRecord, agent: AgentDefinition | undefined, now: number): Promise<string[]> {
    const reasons: string[] = [];
    if (!agent) return reasons;
    if (agent.staleAfterMs !== undefined && now - run.snapshotAt > agent.staleAfterMs) {
      reasons.push(`the snapshot is ${Math.round((now - run.snapshotAt) / 1000)} s old (stale after ${Math.round(agent.staleAfterMs / 1000)} s)`);
    }
    const tools = new Map((agent.tools ?? []).map((t) => [t.name, t]));
    for (const effect of await this.store.listEffects(run.id)) {
      const tool = tools.get(effect.tool);
      if (effect.state !== "done" || !tool?.revalidate) continue;
      const verdict = await tool.revalidate(effect.input, effect.result);
      if (verdict !== true) reasons.push(`effect ${effect.tool} (call ${effect.callSeq}) drifted: ${verdict}`);
    }
    for (const definition of agent.resources ?? []) {
      const held = run.resources[definition.name];
      if (!held || !definition.revalidate) continue;
      const verdict = await definition.revalidate(held.record);
      if (verdict !== true) reasons.push(`resource ${definition.name} drifted: ${verdict}`);
    }
    return reasons;
  }

  async cancel(runId: string, options: ControlOptions = {}): Promise<RunRecord> {
    const command = this.command("cancel", runId, options);
    const reason = options.reason ?? `cancelled by ${command.actor}`;
    let claim = false;
    const run = await this.control(runId, command, async (current, now) => {
      if (current.status === "cancelling" || current.status === "cancelled") return { noop: true };
      if (isTerminal(current.status)) return { refuse: new IllegalTransitionError(runId, "cancel", current.status) };
      const held = this.isHeld(current, now);
      // Claim from the lease alone: an executor that just wrote `paused` is still in the map for a
      // moment but no longer reacts, and `tryClaim` waits for it before taking the run.
      claim = !hasLiveLease(current, now) && this.isWorker && !this.closed && this.agentMap.has(current.agent);
      const since = current.runningSince;
      return {
        update: {
          set: {
            status: "cancelling",
            statusReason: reason,
            pauseMode: null,
            ...(since !== null && !held ? { runningSince: null, activeMs: current.activeMs + now - since } : {}),
          },
          journal: [statusEntry(now, current.status, "cancelling", reason)],
        },
        applied: false,
      };
    });
    if (claim) this.claimSoon(run);
    return run;
  }

  /** What a cancel would do now: compensations newest first and the resources to release. */
  async cancelPreview(runId: string): Promise<CancelPreview> {
    const run = await this.get(runId);
    // A run that has ended cannot be cancelled: nothing would be compensated, so nothing is offered.
    if (isTerminal(run.status)) return { runId, status: run.status, cancellable: false, compensations: [], resources: [], uncertain: [] };
    const effects = pendingCompensations(await this.store.listEffects(runId));
    return {
      runId,
      status: run.status,
      cancellable: true,
      compensations: effects.map((e) => ({ callSeq: e.callSeq, tool: e.tool, input: e.input })),
      resources: Object.entries(run.resources)
        .filter(([, held]) => !held.releasedForPause)
        .map(([name]) => name),
      uncertain: run.inflight?.uncertain ? [{ callSeq: run.inflight.callSeq, tool: run.inflight.name }] : [],
    };
  }

  /** The kill switch: every run in scope halted at once, in-flight calls aborted, no compensation. */
  async halt(options: ControlOptions & { agent?: string } = {}): Promise<{ scope: string; halted: string[] }> {
    const scope = options.agent ? `agent:${options.agent}` : "*";
    const global = this.command("halt", null, options, { scope });
    await this.store.setHalt({ scope, actor: global.actor, reason: global.reason, at: global.createdAt });
    await this.store.insertCommand({ ...global, appliedAt: global.createdAt, outcome: "applied" });
    const halted: string[] = [];
    const runs = await this.store.listRuns({ status: activeStatuses.filter((s) => s !== "halted"), agent: options.agent, limit: 100_000 });
    for (const candidate of runs) {
      const command = this.command("halt", candidate.id, options, { scope });
      try {
        await this.control(candidate.id, command, async (run, now) => {
          if (run.status === "halted") return { noop: true };
          if (isTerminal(run.status)) return { refuse: new IllegalTransitionError(run.id, "halt", run.status) };
          const since = run.runningSince;
          return {
            update: {
              set: {
                status: "halted",
                statusReason: options.reason ?? `halted by ${command.actor}`,
                pauseMode: null,
                ...(since !== null ? { runningSince: null, activeMs: run.activeMs + now - since } : {}),
              },
              journal: [statusEntry(now, run.status, "halted", options.reason ?? null, { actor: command.actor })],
              appliedCommands: await settlePendingCommands(this.store, run.id, { pause: "superseded: halt", cancel: "superseded: halt" }, now),
            },
            applied: true,
          };
        });
        halted.push(candidate.id);
      } catch (error) {
        if (!(error instanceof IllegalTransitionError)) throw error;
      }
    }
    return { scope, halted };
  }

  /** Lifts the halt: halted runs become paused, and their owners decide what next. */
  async unhalt(options: ControlOptions & { agent?: string } = {}): Promise<{ scope: string; paused: string[] }> {
    const scope = options.agent ? `agent:${options.agent}` : "*";
    const global = this.command("unhalt", null, options, { scope });
    await this.store.clearHalt(scope);
    await this.store.insertCommand({ ...global, appliedAt: global.createdAt, outcome: "applied" });
    const paused: string[] = [];
    const remaining = await this.store.listHalts();
    for (const candidate of await this.store.listRuns({ status: ["halted"], agent: options.agent, limit: 100_000 })) {
      if (remaining.some((h) => h.scope === "*" || h.scope === `agent:${candidate.agent}`)) continue;
      const command = this.command("unhalt", candidate.id, options, { scope });
      await this.control(candidate.id, command, async (run, now) => {
        if (run.status !== "halted") return { noop: true };
        return {
          update: { set: { status: "paused", statusReason: "halt lifted", lease: null }, journal: [statusEntry(now, "halted", "paused", "halt lifted", { actor: command.actor })] },
          applied: true,
        };
      });
      paused.push(candidate.id);
    }
    return { scope, paused };
  }

  halts() {
    return this.store.listHalts();
  }

  /**
   * The run's events from `afterSeq`: the journal's history first, then live, with no gap and
   * no duplicate. The bus only carries this process's writes, so a gap in its sequence (another
   * process wrote) is filled from the store before anything after it is delivered; runs
   * executed by another process are followed by polling the journal.
   */
  subscribe(runId: string, options: { afterSeq?: number; pollMs?: number }, listener: (event: RunEvent) => void): () => void {
    let last = options.afterSeq ?? 0;
    let closed = false;
    /** Held bus events, each with the number of store reads started before it arrived. */
    const pending: { event: RunEvent; readsBefore: number }[] = [];
    let readsStarted = 0;
    const deliver = (event: RunEvent) => {
      if (event.kind === "journal") {
        if (event.seq <= last) return;
        last = event.seq;
      } else if (event.seq < last) return;
      listener(event);
    };
    let reading = false;
    let readAgain = false;
    const catchUp = async (): Promise<void> => {
      if (closed) return;
      if (reading) {
        readAgain = true;
        return;
      }
      reading = true;
      try {
        do {
          readAgain = false;
          for (;;) {
            readsStarted += 1;
            const page = await this.store.readJournal(runId, { afterSeq: last, limit: 500 });
            for (const entry of page) if (!closed) deliver({ kind: "journal", runId, seq: entry.seq, entry });
            if (page.length < 500) break;
          }
        } while (readAgain && !closed);
      } catch {
        // The store is unreachable for now: the next poll or event retries.
        return;
      } finally {
        reading = false;
      }
      flush();
    };
    /**
     * Delivers held events in order. One ahead of the journal waits for a read of the store; once
     * a read that started after it arrived has found nothing in between, there is nothing to wait for.
     */
    const flush = () => {
      while (pending.length && !closed && !reading) {
        const { event, readsBefore } = pending[0];
        const ahead = event.kind === "journal" ? event.seq > last + 1 : event.seq > last;
        if (ahead && readsBefore === readsStarted) return void catchUp();
        pending.shift();
        deliver(event);
      }
    };
    const unsubscribe = this.bus.subscribe(runId, (event) => {
      pending.push({ event, readsBefore: readsStarted });
      flush();
    });
    void catchUp();
    const timer = setInterval(() => {
      if (!this.executors.has(runId)) void catchUp();
    }, options.pollMs ?? 100);
    timer.unref?.();
    return () => {
      closed = true;
      clearInterval(timer);
      unsubscribe();
    };
  }

  /** Resolves with the run once `predicate` holds (checked on every event and every poll). */
  async waitFor(runId: string, predicate: ((run: RunRecord) => boolean) | readonly RunStatus[], options: { timeoutMs?: number } = {}): Promise<RunRecord> {
    const test = typeof predicate === "function" ? predicate : (run: RunRecord) => predicate.includes(run.status);
    const timeoutMs = options.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    let wake: () => void = () => undefined;
    // Only journal entries can change the run record; live text deltas never do.
    const unsubscribe = this.bus.subscribe(runId, (event) => {
      if (event.kind === "journal") wake();
    });
    const unnudge = this.bus.onNudge(runId, () => wake());
    try {
      for (;;) {
        const run = await this.get(runId);
        if (test(run)) return run;
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(runId, timeoutMs, run.status);
        // A run executed here changes only through this process's bus (its writes, or a nudge when
        // it takes a record written elsewhere): the store is read again only now and then. Any
        // other run is read every 20 ms.
        const pollMs = this.executors.has(runId) ? 250 : 20;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, pollMs));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    } finally {
      unsubscribe();
      unnudge();
    }
  }

  /** How many runs this process is executing now (at most `concurrency`). */
  get executingCount(): number {
    return this.executors.size;
  }

  isExecuting(runId: string): boolean {
    return this.executors.has(runId);
  }

  /** Waits until this process is no longer executing the run. */
  async settled(runId: string): Promise<void> {
    await this.executors.get(runId)?.done;
  }

  private async claimAvailable(): Promise<void> {
    if (this.closed) return;
    try {
      const now = this.ctx.clock.now();
      const halts = await this.store.listHalts();
      const room = this.concurrency - this.executors.size;
      if (room <= 0) return;
      const wanted = (run: RunRecord) =>
        !this.executors.has(run.id) && this.agentMap.has(run.agent) && (run.status === "cancelling" || !halts.some((h) => h.scope === "*" || h.scope === `agent:${run.agent}`));
      if (this.store.claimRuns) {
        // The store locks what it hands out: workers looking at once get different runs.
        const claimed = await this.store.claimRuns(now, Math.min(room, 50), (run) => (wanted(run) ? this.claimUpdate(run, now) : undefined));
        for (const result of claimed) if (result.ok) this.startExecuting(result);
        return;
      }
      for (const run of await this.store.findClaimable(now, Math.min(room, 50))) {
        if (this.executors.size >= this.concurrency) break;
        if (wanted(run)) await this.tryClaim(run);
      }
    } catch {
      // The next tick tries again.
    }
  }

  /** Claims in the background: if the claim fails the run stays claimable, and a worker's next poll takes it. */
  private claimSoon(run: RunRecord): void {
    this.tryClaim(run).catch(() => undefined);
  }

  /** Takes the run's lease (fencing epoch + 1) and executes it in this process. */
  private async tryClaim(candidate: RunRecord): Promise<void> {
    let run = candidate;
    const previous = this.executors.get(run.id);
    if (previous) {
      // A run resumed the moment its pause landed: the executor that paused it is still winding down.
      await previous.done;
      const fresh = await this.store.getRun(run.id);
      if (!fresh) return;
      run = fresh;
    }
    if (this.executors.has(run.id) || this.closed) return;
    // Full: the run waits in the store, and this worker's next look (or any other worker) takes it.
    if (this.executors.size >= this.concurrency) return;
    if (!this.agentMap.has(run.agent)) return;
    const now = this.ctx.clock.now();
    const update = this.claimUpdate(run, now);
    if (!update) return;
    const result = await this.store.update({ ...update, runId: run.id });
    if (result.ok) this.startExecuting(result);
  }

  /** The write that claims a run for this worker: lease, fencing epoch + 1, and what the journal says of it. */
  private claimUpdate(run: RunRecord, now: number): Omit<RunUpdate, "runId"> | undefined {
    const claimable: RunStatus[] = ["queued", "running", "pausing", "cancelling"];
    if (!claimable.includes(run.status)) return undefined;
    const journal: JournalInput[] = [];
    if (run.status === "queued") journal.push(statusEntry(now, "queued", "running"));
    else if (run.lease) journal.push({ type: "recovery", at: now, data: { previousWorker: run.lease.workerId, worker: this.ctx.workerId, status: run.status } });
    // Taking over from a dead worker: it ran at most until its lease ran out; the time the run sat
    // orphaned after that is not running time.
    const since = run.runningSince;
    const orphaned = run.lease !== null && since !== null ? { activeMs: run.activeMs + Math.max(0, Math.min(now, run.lease.until) - since), runningSince: now } : {};
    return {
      expect: { version: run.version, leaseFree: { now, workerId: this.ctx.workerId } },
      claim: { workerId: this.ctx.workerId, until: now + this.ctx.leaseMs },
      set: { ...(run.status === "queued" || run.status === "running" ? { status: "running", runningSince: since ?? now } : {}), ...orphaned },
      journal,
    };
  }

  /** Executes a run this worker has just claimed. */
  private startExecuting(result: UpdateResult & { ok: true }): void {
    const run = result.run;
    const agent = this.agentMap.get(run.agent);
    if (!agent || this.executors.has(run.id)) return;
    this.bus.publishJournal(result.journal);
    const executor = createExecutor(this.ctx, agent, run, this.resourceHolders.get(run.id));
    this.watcher.add(executor);
    const done = executor.execute().finally(() => {
      this.executors.delete(run.id);
      this.watcher.delete(run.id);
      // A place is free: take the next queued run now rather than at the next tick.
      this.claimSoonAvailable();
      // A resource kept over a pause stays live in this process; the next executor of the run reuses it.
      if (executor.resources.holdsAny) this.resourceHolders.set(run.id, executor.resources);
      else this.resourceHolders.delete(run.id);
      if (isTerminal(executor.current.status)) this.bus.forget(run.id);
    });
    this.executors.set(run.id, { executor, done });
  }
}

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}
