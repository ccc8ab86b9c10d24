import type { Action } from "./agent.js";
import { approvalOf, approvalRequests, approvalRequired, needsApproval, withoutApproval } from "./approval.js";
import { trippedBudget } from "./budgets.js";
import { callEntry, partialText } from "./call-journal.js";
import type { EngineContext } from "./engine-context.js";
import { LeaseLostError, TetherError } from "./errors.js";
import { GateFailedError, PauseSignal, type DurableContext, type FunctionAgentDefinition, type ModelCallOptions, type ModelStepOptions, type StepContext, type StepOptions } from "./function-agent.js";
import { estimateTokens, executeTool, streamModelCall, ToolAbortedError } from "./gate.js";
import { idempotencyKey } from "./ids.js";
import type { Json, JsonObject } from "./json.js";
import { modelKey, type ModelRequest, type ModelResult, type ModelUsage } from "./model.js";
import { divergence, gateMessage, inputHash, ReplayLog, type GateKind, type GateRecord } from "./replay-log.js";
import type { ResourceHolder } from "./resources.js";
import { RunSession, stopped, type Compensator } from "./run-session.js";
import { statusEntry } from "./status-entry.js";
import { undeliveredSteering } from "./steering.js";
import type { EffectRecord, EffectWrite, InflightCall, JournalInput, RunPatch, RunRecord, RunUpdate, SnapshotWrite } from "./store.js";
import type { AnyTool, CheckResult, Tool } from "./tool.js";
import { addUsage, usageEntry, type Usage } from "./usage.js";

/** A call between its `started` and its outcome. */
interface LiveCall {
  seq: number;
  kind: "model" | "tool" | "step";
  abortable: boolean;
  controller: AbortController;
  inflight: InflightCall;
}

/** What a live call came to. */
type LiveResult =
  | { type: "ok"; value: Json; usage?: Usage }
  | { type: "failed"; code: string; message: string }
  | { type: "aborted"; reason: string; data?: JsonObject; usage?: Usage }
  /** The run cannot go on without a person: journal the call's end and pause with this reason. */
  | { type: "pause"; reason: string; data: JsonObject; usage?: Usage };

interface GateCall {
  kind: "model" | "tool" | "step";
  name: string;
  /** Compared with the journal on replay (hashed). */
  input: Json | undefined;
  /** What `call.started` shows of the input: a tool's arguments; a model call's message count. */
  startedData: JsonObject;
  abortable: boolean;
  idempotent: boolean;
  check?: (key: string) => Promise<CheckResult<Json>> | CheckResult<Json>;
  compensate?: Compensator;
  /** Whether a journaled result still holds (`StepOptions.revalidate`), asked when it is replayed. */
  revalidate?(value: Json): Promise<true | string> | true | string;
  /** An effect worth undoing: what compensation receives as the input. */
  effectInput: Json;
  tool?: AnyTool;
  /** What else the outcome's transaction writes (a delivery of messages). */
  onCommit?(run: RunRecord, value: Json, at: number): { set: RunPatch; journal: JournalInput[] };
  live(call: { signal: AbortSignal; key: string; seq: number; input: Json | undefined }): Promise<LiveResult>;
}

type Invocation = { type: "returned"; output: Json } | { type: "threw"; error: unknown } | { type: "stopped" };

/** How long a function that was told to stop gets to unwind (its `finally` blocks) before the run is paused anyway. */
const unwindGraceMs = 200;

/** How long a cancel replays an async-function agent to learn its compensations, at most (see `collectCompensators`). */
const collectBoundMs = 30_000;

/** How often a call's end that expects the record's version is built again before the commit gives up (see `commit`). */
const maxCommitAttempts = 20;

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function toJson(value: unknown, what: string): Json {
  if (value === undefined) return null;
  try {
    return JSON.parse(JSON.stringify(value)) as Json;
  } catch (error) {
    throw new TypeError(`${what} must be JSON (it is journaled and replayed): ${errorMessage(error)}`);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}

/**
 * Executes a claimed run of an async-function agent (function-agent.ts): calls the function from
 * the top, replays each gate whose result the snapshot holds, lets the first one without a
 * result (and any after it) through live, several at once if the function awaits them together.
 * A pause, cancel or halt aborts the calls that may be aborted, waits for the others, and
 * unwinds the function with `PauseSignal`.
 */
export class FunctionExecutor extends RunSession {
  private readonly fn: FunctionAgentDefinition;
  private readonly tools: Map<string, AnyTool>;
  private log = new ReplayLog();
  /** The position the next gate takes: gates are numbered in the order the function calls them. */
  private position = 0;
  private readonly live = new Map<number, LiveCall>();
  /** Gates entered and not yet settled: replaying, recovering, starting, in flight or committing. */
  private activeGates = 0;
  private idleWaiters: (() => void)[] = [];
  /** Why gates refuse from now on; set once the run stops executing here. */
  private stopReason: string | null = null;
  private onStop: (() => void) | null = null;
  /** The function called a gate after it was told to stop (it caught `PauseSignal` and went on). */
  private swallowed = false;
  private stoppingNow = false;
  /** Replaying only to learn the compensations of completed steps, for a cancel. */
  private collecting = false;
  private readonly compensators = new Map<number, Compensator>();
  /** `now`/`random` values taken since the last write; they ride with the next one. */
  private pendingRecords: GateRecord[] = [];
  private resourcesReady = false;
  /** Replayed steps already asked whether their result still holds (once per resume). */
  private readonly revalidated = new Set<number>();

  constructor(ctx: EngineContext, agent: FunctionAgentDefinition, claimed: RunRecord, resources?: ResourceHolder) {
    super(ctx, agent, claimed, resources);
    this.fn = agent;
    this.tools = new Map((agent.tools ?? []).map((t) => [t.name, t]));
  }

  protected async drive(hasState: boolean): Promise<void> {
    if (hasState) this.log = ReplayLog.fromState(this.state);
    for (;;) {
      const status = this.run.status;
      if (status === "halted") return this.leaveHalted();
      if (this.stopAll.signal.aborted) return;
      if (status === "cancelling") {
        if (hasState) await this.collectCompensators();
        await this.cancel();
        continue;
      }
      if (status === "pausing") {
        await this.untilIdle();
        if (await this.finishPause()) return;
        continue;
      }
      if (status !== "running" || !hasState) return;
      if (!this.resourcesReady) {
        await this.acquireResources();
        this.resourcesReady = true;
        continue;
      }
      const outcome = await this.invoke();
      if (outcome.type === "returned") {
        if (await this.finish(outcome.output)) return;
        continue;
      }
      if (outcome.type === "threw") return this.fail("agent_error", `agent ${this.fn.name} failed: ${errorMessage(outcome.error)}`);
      // Stopped: the status says why (pausing, cancelling, halted), once the write that asked for
      // the stop has landed (a pause a gate of the function requested: a replay that diverged, a
      // step gone stale); a lost lease stops the loop. Read before that write, the status still
      // said running, and the loop left the run in `pausing` with no executor to finish it.
      await this.serial(async () => undefined);
      if (this.run.status === "running" && !this.stopAll.signal.aborted) return;
    }
  }

  /** Calls the function once, from the top, until it returns, throws, or stops here. */
  private async invoke(): Promise<Invocation> {
    this.position = 0;
    this.stopReason = null;
    this.swallowed = false;
    const stopped = new Promise<void>((resolve) => (this.onStop = resolve));
    const settled: Promise<Invocation> = Promise.resolve()
      .then(() => this.fn.run(this.context(), this.run.input))
      .then(
        (output): Invocation => ({ type: "returned", output: toJson(output, `the output of agent ${this.fn.name}`) }),
        (error: unknown): Invocation => ({ type: "threw", error }),
      );
    const first = await Promise.race([settled, stopped.then((): Invocation => ({ type: "stopped" }))]);
    if (first.type === "stopped" || this.stopReason !== null) {
      await this.untilIdle();
      // The function gets a moment to unwind; what it returns after a stop is not the run's output.
      await Promise.race([settled, delay(unwindGraceMs)]);
      if (this.swallowed && !this.detached) await this.noteSwallowed().catch(() => undefined);
      return { type: "stopped" };
    }
    // Calls the function started but did not await still finish and are journaled first.
    await this.untilIdle();
    if (this.stopReason !== null) return { type: "stopped" };
    return first;
  }

  private async finish(output: Json): Promise<boolean> {
    // Calls left over from a crash that this run of the code never reached: nothing will finish them.
    const leftover = this.run.inflightCalls ?? [];
    if (leftover.length) {
      const at = this.now();
      await this.serial(() =>
        this.write({
          set: { inflightCalls: [], inflight: null },
          journal: leftover.map((c) => callEntry("call.aborted", at, c.callSeq, { kind: c.kind, name: c.name, reason: "not_reached" })),
        }),
      );
    }
    return this.complete(output);
  }

  private async noteSwallowed(): Promise<void> {
    await this.serial(() =>
      this.write({
        journal: [{ type: "recovery", at: this.now(), data: { problem: `agent ${this.fn.name} caught the pause signal and went on; its later calls were refused and its return value ignored (let PauseSignal propagate)` } }],
      }),
    );
  }


  private stopWith(reason: string): void {
    if (this.stopReason === null) {
      this.stopReason = reason;
      // Gates the function calls in the same synchronous stretch (the rest of a `Promise.all`) are
      // refused without blame; one called later comes from code that caught the signal.
      this.stoppingNow = true;
      queueMicrotask(() => (this.stoppingNow = false));
    }
    this.onStop?.();
  }

  /** A gate called after the stop: refused, and noted if the function went on after catching the signal. */
  private refuseLate(): PauseSignal {
    if (!this.stoppingNow) this.swallowed = true;
    return this.refusal();
  }

  private refusal(): PauseSignal {
    return new PauseSignal(this.stopReason ?? this.run.status);
  }

  private untilIdle(): Promise<void> {
    if (this.activeGates === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  protected abortCalls(reason: unknown): void {
    this.stopWith(reason instanceof Error ? reason.message : String(reason));
    for (const call of this.live.values()) call.controller.abort(reason);
  }

  protected react(): void {
    const { status } = this.run;
    if (status === "halted") {
      this.stopAll.abort("halted");
      this.abortCalls("halted");
      return;
    }
    if (status !== "pausing" && status !== "cancelling") return;
    this.stopWith(status === "cancelling" ? "cancel" : "pause");
    const calls = [...this.live.values()].map((call) => ({ ...call, abortable: call.kind === "model" || call.abortable }));
    this.reachCallsInFlight(calls, (callSeq) => this.live.has(callSeq));
  }


  protected override compensatorFor(effect: EffectRecord): Compensator | undefined {
    return this.compensators.get(effect.callSeq) ?? super.compensatorFor(effect);
  }

  /**
   * A step's `compensate` is a function in the agent's code, not in the store: before a cancel,
   * the function is replayed (no call is made: the first gate without a result stops it) so
   * each completed step declares its compensation again.
   */
  private async collectCompensators(): Promise<void> {
    const effects = await this.ctx.store.listEffects(this.run.id);
    const missing = () => effects.filter((e) => (e.state === "done" || e.state === "compensating") && !this.compensatorFor(e));
    if (missing().length === 0) return;
    this.collecting = true;
    this.position = 0;
    let found!: () => void;
    const allFound = new Promise<void>((resolve) => (found = resolve));
    this.compensatorFound = () => {
      if (missing().length === 0) found();
    };
    try {
      // The replay ends at the first gate the journal does not hold, or once every effect to undo
      // has its compensation: however long the function's own code takes between its gates (a
      // crawl's polite delay), up to `collectBoundMs` for a function that waits on something that
      // never comes; an effect still without one is then reported failed, not undone.
      const settled = Promise.resolve()
        .then(() => this.fn.run(this.context(), this.run.input))
        .catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, collectBoundMs).unref()));
      await Promise.race([settled, allFound, bound]);
      clearTimeout(timer);
    } finally {
      this.collecting = false;
      this.compensatorFound = undefined;
    }
  }

  /** Told of each compensation the replay of `collectCompensators` finds. */
  private compensatorFound: (() => void) | undefined;

  private context(): DurableContext {
    const self = this;
    return {
      runId: this.run.id,
      model: (request, options) => this.modelGate(request, options),
      tool: ((tool: AnyTool | string, input: Json) => this.toolGate(tool, input)) as DurableContext["tool"],
      step: (name, fn, options) => this.stepGate(name, fn, options),
      modelStep: (name, fn, options) => this.modelStepGate(name, fn, options),
      messages: () => this.messagesGate(),
      now: () => self.valueGate("now", () => this.ctx.clock.now()) as number,
      random: () => self.valueGate("random", () => Math.random()) as number,
    };
  }

  /** `now` and `random`: journaled with the next write, returned from the journal on replay. */
  private valueGate(kind: "now" | "random", take: () => Json): Json {
    const seq = ++this.position;
    if (this.stopReason !== null && !this.collecting) {
      throw this.refuseLate();
    }
    const recorded = this.log.get(seq);
    if (recorded) {
      if (recorded.kind !== kind) throw this.diverge(seq, recorded, { kind, name: kind, hash: "" });
      return recorded.value ?? null;
    }
    const record: GateRecord = { seq, kind, name: kind, hash: "", value: take() };
    this.log.add(record);
    if (!this.collecting) this.pendingRecords.push(record);
    return record.value!;
  }

  private modelGate(request: ModelRequest | string, options: ModelCallOptions = {}): Promise<ModelResult> {
    const req: ModelRequest = typeof request === "string" ? { messages: [{ role: "user", content: request }], tools: [] } : { ...request, tools: request.tools ?? [] };
    const model = this.ctx.resolveModel(options.model ?? this.run.model ?? this.fn.model);
    const name = modelKey(model);
    return this.gate<ModelResult>({
      kind: "model",
      name,
      // What the call depends on, compared on replay: the conversation's length and its newest
      // message (the earlier ones were compared at the gates that produced them), and the tools;
      // hashing the whole conversation at every call would cost O(history) per gate.
      input: { messages: req.messages.length, last: (req.messages[req.messages.length - 1] ?? null) as unknown as Json, tools: req.tools.map((t) => t.name) },
      startedData: { messages: req.messages.length, tools: req.tools.length },
      abortable: true,
      idempotent: true,
      effectInput: null,
      live: async ({ signal, key, seq }): Promise<LiveResult> => {
        const runId = this.run.id;
        const outcome = await streamModelCall(model, req, { signal, idempotencyKey: key, onDelta: (text, offset) => this.ctx.bus.publishDelta(runId, seq, text, this.ctx.clock, offset) });
        if (outcome.type === "completed") return { type: "ok", value: outcome.result as unknown as Json, usage: this.priced(name, outcome.result.usage) };
        const usage = this.priced(name, outcome.usage);
        if (outcome.type === "aborted") {
          return { type: "aborted", reason: String(signal.reason ?? "aborted"), usage, data: { usage: usageEntry(usage), estimated: outcome.estimated, streamedChars: outcome.text.length, ...partialText(outcome.text) } as JsonObject };
        }
        return { type: "pause", reason: `model_error: ${outcome.error.message}`, usage, data: { error: outcome.error.code, message: outcome.error.message, usage: usageEntry(usage) } };
      },
    });
  }

  private priced(key: string, u: { inputTokens: number; outputTokens: number; cachedInputTokens?: number }): Usage {
    const usage = { inputTokens: u.inputTokens, outputTokens: u.outputTokens, cachedInputTokens: u.cachedInputTokens ?? 0 };
    return { ...usage, costUsd: this.ctx.prices.cost(key, usage) };
  }

  private toolGate(toolOrName: AnyTool | string, input: Json): Promise<Json> {
    const tool = typeof toolOrName === "string" ? this.tools.get(toolOrName) : toolOrName;
    if (!tool) {
      const known = [...this.tools.keys()].join(", ") || "none";
      return Promise.reject(new TetherError("invalid_input", `agent ${this.fn.name} has no tool named "${String(toolOrName)}" (its tools: ${known}); pass the tool object or add it to the agent's tools`));
    }
    const args = toJson(input, `the input of tool ${tool.name}`);
    return this.gate<Json>({
      kind: "tool",
      name: tool.name,
      input: args,
      startedData: { input: args },
      abortable: tool.abortable === true,
      idempotent: tool.idempotent === true,
      check: tool.check ? (key) => tool.check!(key, args) : undefined,
      compensate: tool.compensate ? (i, result, ctx) => tool.compensate!(i, result, ctx) : undefined,
      effectInput: args,
      tool,
      live: async ({ signal, key, seq, input: approved }) => {
        try {
          const outcome = await this.untilStoppedUnless(
            tool.abortable === true,
            executeTool(tool, approved ?? args, {
              runId: this.run.id,
              idempotencyKey: key,
              signal,
              fencingToken: this.run.epoch,
              progress: (update) => void this.serial(() => this.write({ journal: [callEntry("call.progress", this.now(), seq, { ...update })] })).catch(() => undefined),
              resource: <T>(name: string) => this.resources.get(name) as T,
            }),
          );
          if (outcome.ok) return { type: "ok", value: outcome.output };
          return { type: "failed", code: outcome.error, message: this.ctx.redact(outcome.message) };
        } catch (error) {
          if (error instanceof ToolAbortedError) return { type: "aborted", reason: String(error.reason ?? "aborted") };
          if (TetherError.isInstance(error) && error.code === "tool_unavailable") return { type: "pause", reason: `tool_unavailable: ${error.message}`, data: { error: error.code, message: error.message } };
          throw error;
        }
      },
    });
  }

  /**
   * Replay's fast path: the next gate's journaled result, when it has one and nothing stops the
   * run, without building the call (what most gates of a long resume are).
   */
  private replayedStep(name: string, input: Json | undefined, needsCall: boolean): GateRecord | undefined {
    if (this.stopReason !== null || this.collecting || needsCall) return undefined;
    const recorded = this.log.get(this.position + 1);
    if (!recorded || recorded.error || recorded.kind !== "step" || recorded.name !== name || recorded.hash !== inputHash(input)) return undefined;
    this.position++;
    return recorded;
  }

  private stepGate<T extends Json | void>(name: string, fn: (ctx: StepContext) => Promise<T> | T, options: StepOptions<T> = {}): Promise<T> {
    const replayed = this.replayedStep(name, options.input, options.compensate !== undefined || options.revalidate !== undefined);
    if (replayed) return Promise.resolve(replayed.value as T);
    const compensate = options.compensate;
    const check = options.check;
    return this.gate<T>({
      kind: "step",
      name,
      input: options.input,
      startedData: options.input === undefined ? {} : { input: options.input },
      abortable: options.abortable === true,
      idempotent: options.idempotent === true,
      check: check ? async (key) => (await check(key)) as CheckResult<Json> : undefined,
      compensate: compensate ? (_input, result, ctx) => compensate(result as T, ctx) : undefined,
      revalidate: options.revalidate ? (value) => options.revalidate!(value as T) : undefined,
      effectInput: options.input ?? null,
      live: async ({ signal, key }) => {
        const ctx: StepContext = { runId: this.run.id, idempotencyKey: key, signal, fencingToken: this.run.epoch, resource: <R>(n: string) => this.resources.get(n) as R };
        try {
          const value = await this.untilStoppedUnless(options.abortable === true, Promise.resolve().then(() => fn(ctx)));
          return { type: "ok", value: toJson(value, `the result of step ${name}`) };
        } catch (error) {
          if (signal.aborted) return { type: "aborted", reason: String(signal.reason ?? "aborted") };
          if (error === stopped) throw error;
          return { type: "failed", code: "step_error", message: this.ctx.redact(`step ${name} failed: ${errorMessage(error)}`) };
        }
      },
    }) as Promise<T>;
  }

  /**
   * The messages people sent since the last delivery: journaled as `message.delivered`, and as a
   * gate result for replay. With nothing to deliver it writes nothing of its own: its (empty)
   * result rides with the next write, as `now()`'s does, so reading before every model call is free.
   */
  private messagesGate(): Promise<{ text: string; author: string }[]> {
    const seq = this.position + 1;
    if (!this.collecting && this.stopReason === null && !this.log.get(seq) && undeliveredSteering(this.run).length === 0) {
      this.position = seq;
      const record: GateRecord = { seq, kind: "step", name: "messages", hash: "", value: [] };
      this.log.add(record);
      this.pendingRecords.push(record);
      return Promise.resolve([]);
    }
    return this.gate({
      kind: "step",
      name: "messages",
      input: undefined,
      startedData: {},
      abortable: false,
      idempotent: true,
      effectInput: null,
      live: async () => ({ type: "ok", value: undeliveredSteering(this.run).map((m) => ({ id: m.id, text: m.text, author: m.actor })) }),
      onCommit: (run, value, at) => {
        const delivered = value as { id: string; text: string; author: string }[];
        const queue = run.steering ?? { messages: [], delivered: 0 };
        return {
          set: delivered.length ? { steering: { ...queue, delivered: queue.delivered + delivered.length } } : {},
          journal: delivered.map((m) => ({ type: "message.delivered", at, data: { id: m.id, actor: m.author, text: m.text } })),
        };
      },
    });
  }

  private modelStepGate<T extends Json>(name: string, fn: (ctx: StepContext) => Promise<T>, options: ModelStepOptions<T>): Promise<T> {
    return this.gate<T>({
      kind: "model",
      name,
      input: options.input,
      startedData: {},
      abortable: true,
      idempotent: true,
      effectInput: null,
      live: async ({ signal, key }): Promise<LiveResult> => {
        const ctx: StepContext = { runId: this.run.id, idempotencyKey: key, signal, fencingToken: this.run.epoch, resource: <R>(n: string) => this.resources.get(n) as R };
        try {
          const value = toJson(await fn(ctx), `the result of model call ${name}`);
          const usage = options.usage(value as T);
          return { type: "ok", value, ...(usage ? { usage: this.priced(name, usage) } : {}) };
        } catch (error) {
          if (signal.aborted) return this.abortedModelStep(name, signal, options.partial?.());
          const message = this.ctx.redact(errorMessage(error));
          return { type: "pause", reason: `model_error: ${message}`, data: { error: "model_error", message } };
        }
      },
    });
  }

  /** An aborted model step: what it had produced counts (estimated where the provider reported nothing), as for `ctx.model`. */
  private abortedModelStep(name: string, signal: AbortSignal, partial: ReturnType<NonNullable<ModelStepOptions<Json>["partial"]>> | undefined): LiveResult {
    const reason = String(signal.reason ?? "aborted");
    if (!partial) return { type: "aborted", reason };
    const reported = partial.usage ?? {};
    const outputTokens = Math.max(reported.outputTokens ?? 0, estimateTokens(partial.text.length));
    const estimated = reported.inputTokens === undefined || (reported.outputTokens ?? 0) < outputTokens;
    const usage = this.priced(name, { inputTokens: reported.inputTokens ?? estimateTokens(partial.inputChars), outputTokens, cachedInputTokens: reported.cachedInputTokens ?? 0 });
    return { type: "aborted", reason, usage, data: { usage: usageEntry(usage), estimated, streamedChars: partial.text.length, ...partialText(partial.text) } as JsonObject };
  }

  /** A call that ignores its signal is not waited for once the run is halted or the lease lost. */
  private untilStoppedUnless<T>(abortable: boolean, promise: Promise<T>): Promise<T> {
    return abortable ? promise : this.untilStopped(promise);
  }

  /** Asks a replayed step whether its result still holds; one that drifted pauses the run as stale (a PauseSignal). */
  private async revalidate(call: GateCall, seq: number, value: Json): Promise<void> {
    this.revalidated.add(seq);
    let verdict: true | string;
    try {
      verdict = await call.revalidate!(value);
    } catch (error) {
      verdict = `its revalidate threw: ${errorMessage(error)}`;
    }
    if (verdict === true) return;
    if (this.stopReason !== null) throw this.refusal();
    const reason = this.ctx.redact(`stale_snapshot: step ${call.name} (gate ${seq}) drifted: ${verdict}`);
    this.stopWith("stale_snapshot");
    void this.serial(() => this.requestPause(reason)).catch(() => undefined);
    throw new PauseSignal("stale_snapshot");
  }

  private diverge(seq: number, journaled: GateRecord, now: { kind: GateKind; name: string; hash: string }): PauseSignal {
    const reason = divergence(seq, journaled, now);
    this.stopWith("nondeterministic_replay");
    if (!this.collecting) {
      const entry: JournalInput = {
        type: "recovery",
        at: this.now(),
        callSeq: seq,
        data: { problem: "nondeterministic_replay", journaled: { kind: journaled.kind, name: journaled.name, hash: journaled.hash }, now: { kind: now.kind, name: now.name, hash: now.hash } },
      };
      void this.serial(() => this.requestPause(reason, [entry])).catch(() => undefined);
    }
    return new PauseSignal("nondeterministic_replay");
  }

  /** One gate: replay its journaled result, or recover it after a crash, or check control, journal `started`, and make the call. */
  private async gate<T>(call: GateCall): Promise<T> {
    const seq = ++this.position;
    if (this.stopReason !== null && !this.collecting) {
      throw this.refuseLate();
    }
    this.activeGates++;
    try {
      return await this.pass<T>(call, seq);
    } finally {
      if (--this.activeGates === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  private async pass<T>(call: GateCall, seq: number): Promise<T> {
    const hash = inputHash(call.input);
    const recorded = this.log.get(seq);
    if (recorded) {
      if (recorded.kind !== call.kind || recorded.name !== call.name || recorded.hash !== hash) throw this.diverge(seq, recorded, { kind: call.kind, name: call.name, hash });
      if (call.compensate && !recorded.error) {
        this.compensators.set(seq, call.compensate);
        this.compensatorFound?.();
      }
      if (recorded.error) throw new GateFailedError(call.name, recorded.error.code, recorded.error.message);
      if (call.revalidate && !this.collecting && !this.run.forcedResume && !this.revalidated.has(seq)) await this.revalidate(call, seq, recorded.value ?? null);
      return recorded.value as T;
    }
    if (this.collecting) throw new PauseSignal("cancel");
    const key = idempotencyKey(this.run.id, seq);
    const earlier = this.run.inflightCalls?.find((c) => c.callSeq === seq);
    let input = call.input;
    let recoveryNote: JournalInput[] = [];
    if (earlier) {
      if (earlier.name !== call.name) throw this.diverge(seq, { seq, kind: earlier.kind, name: earlier.name, hash: "" }, { kind: call.kind, name: call.name, hash });
      const recovered = await this.recover(call, earlier, key);
      if (recovered.type === "result") return this.commit<T>(call, seq, earlier, recovered.result, recovered.journal);
      recoveryNote = recovered.journal;
    }
    let gated = call;
    if (call.kind === "tool") {
      const approval = await this.approvalGate(call, seq);
      if (approval.type === "refused") return this.commit<T>(call, seq, earlier ?? this.inflightFor(call, seq), approval.result, []);
      if (approval.input !== undefined) {
        // Approved with edited arguments: the tool runs with them, and `call.started` and the
        // effect a cancel would undo name them, not the ones the agent proposed.
        input = approval.input;
        gated = { ...call, startedData: { ...call.startedData, input: approval.input }, effectInput: approval.input };
      }
    }
    const started = await this.start(gated, seq, key, hash, recoveryNote);
    return this.perform<T>(gated, seq, key, started, input);
  }

  private inflightFor(call: GateCall, seq: number): InflightCall {
    return { callSeq: seq, kind: call.kind === "model" ? "model" : "tool", name: call.name, action: { type: call.kind } as Json, startedAt: this.now() };
  }

  /**
   * A call this run started before and never finished (the worker died; or a person decided on
   * it). Never a silent duplicate: a model call is made again, an idempotent call retried, a
   * checkable one asked; anything else is `uncertain` and waits for a person.
   */
  private async recover(call: GateCall, earlier: InflightCall, key: string): Promise<{ type: "result"; result: LiveResult; journal: JournalInput[] } | { type: "live"; journal: JournalInput[] }> {
    const at = this.now();
    const note = (decision: string): JournalInput => ({ type: "recovery", at, callSeq: earlier.callSeq, data: { decision, name: earlier.name } });
    const resolution = earlier.resolution ?? (this.run.inflight?.callSeq === earlier.callSeq ? this.run.inflight.resolution : undefined);
    if (resolution) {
      const resolved: JournalInput = { type: "call.resolved", at, callSeq: earlier.callSeq, data: { decision: resolution.action, actor: resolution.actor } };
      if (resolution.action === "retry") return { type: "live", journal: [resolved] };
      if (resolution.action === "skip") return { type: "result", result: { type: "failed", code: "skipped", message: `call skipped by ${resolution.actor}` }, journal: [resolved] };
      return { type: "result", result: { type: "ok", value: resolution.result ?? null }, journal: [resolved] };
    }
    if (call.kind === "model") return { type: "live", journal: [note("retry")] };
    if (call.check) {
      let checked: CheckResult<Json>;
      try {
        checked = await call.check(key);
      } catch (error) {
        return this.uncertain(earlier, `check(${key}) failed: ${errorMessage(error)}`, [note("uncertain")]);
      }
      if (checked.done) return { type: "result", result: { type: "ok", value: checked.result ?? null }, journal: [note("apply")] };
      return { type: "live", journal: [note("retry")] };
    }
    if (call.idempotent) return { type: "live", journal: [note("retry")] };
    return this.uncertain(earlier, `the worker stopped during a ${call.kind} that is neither idempotent nor checkable`, [note("uncertain")]);
  }

  private async uncertain(earlier: InflightCall, reason: string, journal: JournalInput[]): Promise<never> {
    this.stopWith("uncertain_effect");
    const at = this.now();
    await this.serial(() =>
      this.write({
        expect: { status: ["running"] },
        // The call a person decides on next; a decision already made on another call stays with that call.
        set: {
          inflight: { ...earlier, uncertain: true },
          inflightCalls: (this.run.inflightCalls ?? []).map((c) => (c.callSeq === earlier.callSeq ? { ...c, uncertain: true } : c)),
          status: "pausing",
          statusReason: "uncertain_effect",
          pauseMode: "immediate",
        },
        journal: [...journal, callEntry("call.uncertain", at, earlier.callSeq, { kind: earlier.kind, name: earlier.name, reason }), statusEntry(at, "running", "pausing", "uncertain_effect")],
      }),
    );
    throw this.refusal();
  }

  /** A tool that needs a person's approval: ask and pause; deliver a rejection as its result; or go on with the approved arguments. */
  private async approvalGate(call: GateCall, seq: number): Promise<{ type: "go"; input?: Json } | { type: "refused"; result: LiveResult }> {
    const action: Action & { type: "tool" } = { type: "tool", toolCallId: `gate:${seq}`, toolName: call.name, input: call.input ?? null };
    const request = approvalOf(this.run, action);
    // The call at this position asks for other arguments than those a person was asked about (the
    // function read something that changed since): what was decided is not this call.
    if (request && inputHash(request.input) !== inputHash(action.input)) {
      throw this.diverge(seq, { seq, kind: "tool", name: request.tool, hash: inputHash(request.input) }, { kind: call.kind, name: call.name, hash: inputHash(action.input) });
    }
    const decision = request?.decision;
    if (decision?.decision === "approved") return { type: "go", input: decision.input ?? undefined };
    if (decision?.decision === "rejected") {
      const message = decision.actor === "deadline" ? `this call was not run: ${decision.note ?? "its approval expired"}` : `a person (${decision.actor}) rejected this call; it was not run. Their note: ${decision.note ?? "(none)"}`;
      return { type: "refused", result: { type: "failed", code: "rejected", message } };
    }
    if (!request && !(await needsApproval(call.tool, action.input))) return { type: "go" };
    this.stopWith(approvalRequired);
    const at = this.now();
    await this.serial(async () => {
      const fresh = request ? { approvals: this.run.approvals ?? [], journal: [] as JournalInput[] } : approvalRequests(this.run, [{ action, tool: call.tool!, callSeq: seq }], at);
      const asked = await this.write({
        expect: { status: ["running"] },
        set: { status: "pausing", statusReason: approvalRequired, pauseMode: "immediate", approvals: fresh.approvals },
        journal: [...fresh.journal, statusEntry(at, "running", "pausing", approvalRequired)],
      });
      if (asked) for (const r of fresh.approvals) if (r.expiresAt !== null && !r.decision) this.ctx.approvalDeadline(this.run.id, r.expiresAt);
    });
    throw this.refusal();
  }

  /** Control checked and `started` journaled in one transaction; a budget that trips pauses instead. */
  private async start(call: GateCall, seq: number, key: string, hash: string, extra: JournalInput[]): Promise<InflightCall> {
    return this.serial(async () => {
      if (this.stopReason !== null || this.run.status !== "running") throw this.refusal();
      const signature = call.kind === "tool" ? `${call.name}:${JSON.stringify(call.input)}` : null;
      const repeats = signature !== null && this.run.guard.lastToolSignature === signature ? this.run.guard.repeats + 1 : 1;
      const tripped = trippedBudget(this.run.budgets, { usage: this.run.usage, step: this.run.step, activeMs: this.leavingRunning().activeMs ?? 0, repeatedToolCalls: signature ? repeats : 0 });
      if (tripped) {
        this.stopWith(tripped);
        await this.requestPause(tripped, [{ type: "budget.tripped", at: this.now(), data: { reason: tripped } }]);
        throw this.refusal();
      }
      const at = this.now();
      const inflight: InflightCall = { callSeq: seq, kind: call.kind === "model" ? "model" : "tool", name: call.name, action: { type: call.kind, ...(call.kind === "tool" ? { input: call.input ?? null } : {}) } as Json, startedAt: at };
      const inflightCalls = [...(this.run.inflightCalls ?? []).filter((c) => c.callSeq !== seq), inflight];
      const pending = this.pendingSnapshot();
      const ok = await this.write({
        expect: { status: ["running"] },
        set: {
          nextCallSeq: Math.max(this.run.nextCallSeq, seq + 1),
          inflightCalls,
          inflight: inflightCalls[0],
          ...(signature ? { guard: { ...this.run.guard, lastToolSignature: signature, repeats } } : {}),
        },
        journal: [...extra, callEntry("call.started", at, seq, { kind: call.kind, name: call.name, key, ...(hash ? { hash } : {}), ...call.startedData })],
        ...(pending ? { snapshot: pending.snapshot } : {}),
      }).catch((error: unknown) => {
        if (pending) this.state.messages.length -= pending.count;
        throw error;
      });
      if (!ok) {
        if (pending) this.state.messages.length -= pending.count;
        throw this.refusal();
      }
      if (pending) this.writer.commit();
      return inflight;
    });
  }

  /**
   * Values taken since the last write (`now`, `random`, an empty `messages`), as a snapshot at the
   * current step: `count` messages appended to the state, to take back if the write fails, and
   * the writer to commit if it succeeds.
   */
  private pendingSnapshot(): { snapshot: SnapshotWrite; count: number } | undefined {
    if (!this.pendingRecords.length) return undefined;
    for (const record of this.pendingRecords) this.state.messages.push(gateMessage(record));
    const count = this.pendingRecords.length;
    this.pendingRecords = [];
    return { snapshot: this.writer.prepare(this.state, this.run.step, this.now()), count };
  }

  private async perform<T>(call: GateCall, seq: number, key: string, inflight: InflightCall, input: Json | undefined): Promise<T> {
    const controller = new AbortController();
    const live: LiveCall = { seq, kind: call.kind, abortable: call.abortable, controller, inflight };
    this.live.set(seq, live);
    // A pause or cancel recorded while `started` was being written applies to this call now.
    this.react();
    if (this.stopAll.signal.aborted) controller.abort(this.stopAll.signal.reason);
    let result: LiveResult;
    try {
      // Stopped between its `started` and here (a pause that reached the run meanwhile): the call
      // never starts, as a function that only listens for the signal's `abort` event would not see it.
      if (controller.signal.aborted && !this.stopAll.signal.aborted) result = { type: "aborted", reason: String(controller.signal.reason ?? "aborted") };
      else result = await call.live({ signal: controller.signal, key, seq, input });
    } catch (error) {
      if (error === stopped) {
        this.settled(seq);
        throw this.refusal();
      }
      result = { type: "failed", code: "internal_error", message: errorMessage(error) };
    }
    try {
      return await this.commit<T>(call, seq, inflight, result, []);
    } finally {
      this.settled(seq);
    }
  }

  private settled(seq: number): void {
    this.live.delete(seq);
  }

  /** The calls left in flight once call `seq` has ended. */
  private callsLeft(seq: number): RunPatch {
    const remaining = (this.run.inflightCalls ?? []).filter((c) => c.callSeq !== seq);
    return {
      inflightCalls: remaining,
      inflight: this.run.inflight && this.run.inflight.callSeq !== seq ? this.run.inflight : (remaining[0] ?? null),
      ...(this.run.waitingFor?.callSeq === seq ? { waitingFor: null } : {}),
    };
  }

  /** The call's outcome, its record in the snapshot and the usage, in one transaction; then what the function sees. */
  private async commit<T>(call: GateCall, seq: number, inflight: InflightCall, result: LiveResult, extra: JournalInput[]): Promise<T> {
    const written = await this.serial(async () => {
      const at = this.now();
      const durationMs = at - inflight.startedAt;
      const usage = result.type === "ok" || result.type === "aborted" || result.type === "pause" ? result.usage : undefined;
      if (result.type === "aborted" || result.type === "pause") {
        if (result.type === "pause") this.stopWith(result.reason);
        const pending = this.pendingSnapshot();
        // Built again from the record as it is when the move to `pausing` is refused (see `writePausing`).
        const stoppedCall = () => ({
          set: { ...this.callsLeft(seq), ...(usage ? { usage: addUsage(this.run.usage, usage) } : {}) },
          journal: [
            ...extra,
            callEntry(result.type === "aborted" ? "call.aborted" : "call.failed", at, seq, { kind: call.kind, name: call.name, ...(result.type === "aborted" ? { reason: result.reason } : {}), ...result.data, durationMs }),
          ],
          ...(pending ? { snapshot: pending.snapshot } : {}),
        });
        let ok: boolean;
        try {
          ok = (result.type === "pause" && (await this.writePausing(stoppedCall, result.reason))) || (await this.write(stoppedCall()));
        } catch (error) {
          if (pending) this.state.messages.length -= pending.count;
          throw error;
        }
        if (pending && ok) this.writer.commit();
        else if (pending) this.state.messages.length -= pending.count;
        return undefined;
      }
      const record: GateRecord =
        result.type === "ok"
          ? { seq, kind: call.kind, name: call.name, hash: inputHash(call.input), value: result.value }
          : { seq, kind: call.kind, name: call.name, hash: inputHash(call.input), error: { code: result.code, message: result.message } };
      for (const pending of this.pendingRecords) this.state.messages.push(gateMessage(pending));
      const pendingCount = this.pendingRecords.length;
      this.state.messages.push(gateMessage(record));
      const step = this.run.step + 1;
      const snapshot = this.writer.prepare(this.state, step, at);
      const effect: EffectWrite[] =
        call.compensate && result.type === "ok" ? [{ callSeq: seq, tool: call.name, input: call.effectInput, result: result.value, state: "done", attempts: 0, error: null, updatedAt: at }] : [];
      const completed = callEntry(result.type === "ok" ? "call.completed" : "call.failed", at, seq, {
        kind: call.kind,
        name: call.name,
        durationMs,
        ...(usage ? { usage: usageEntry(usage) } : {}),
        ...(result.type === "failed" ? { error: result.code, message: result.message } : {}),
        resultInMessage: this.state.messages.length - 1,
      });
      // The call's end, from the record as it is. A call whose commit also changes a part of the
      // record that another process may change meanwhile (the messages gate marks the steering
      // queue delivered while a person may be adding to it) expects the record's version, and is
      // built again from the newer record when it moved: a message said meanwhile is never lost.
      const callEnd = (): Omit<RunUpdate, "runId"> => {
        const extraWrite = result.type === "ok" && call.onCommit ? call.onCommit(this.run, result.value, at) : { set: {}, journal: [] };
        const approvals = call.kind === "tool" ? withoutApproval(this.run, { type: "tool", toolCallId: `gate:${seq}`, toolName: call.name, input: call.input ?? null }) : undefined;
        return {
          ...(Object.keys(extraWrite.set).length > 0 ? { expect: { version: this.run.version } } : {}),
          set: { ...this.callsLeft(seq), ...(usage ? { usage: addUsage(this.run.usage, usage) } : {}), step, ...(approvals ? { approvals } : {}), ...extraWrite.set },
          journal: [...extra, ...extraWrite.journal, completed],
          snapshot,
          ...(effect.length ? { effects: effect } : {}),
        };
      };
      let ok = false;
      try {
        for (let attempt = 1; !ok; attempt++) {
          const update = callEnd();
          ok = await this.write(update);
          if (update.expect === undefined) break;
          if (!ok && attempt >= maxCommitAttempts) throw new TetherError("store_error", `run ${this.run.id}: its record kept changing while call ${seq} (${call.name}) was being committed; gave up after ${attempt} attempts`);
        }
      } catch (error) {
        this.state.messages.length -= pendingCount + 1;
        throw error;
      }
      if (!ok) {
        this.state.messages.length -= pendingCount + 1;
        return undefined;
      }
      this.pendingRecords = [];
      this.writer.commit();
      this.log.add(record);
      if (call.compensate && result.type === "ok") this.compensators.set(seq, call.compensate);
      return record;
    }).catch((error: unknown) => {
      if (error instanceof LeaseLostError) {
        this.stopWith("lease_lost");
        return undefined;
      }
      throw error;
    });
    if (!written) throw this.refusal();
    if (written.error) throw new GateFailedError(call.name, written.error.code, written.error.message);
    return written.value as T;
  }
}

