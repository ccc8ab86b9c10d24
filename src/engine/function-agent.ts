import type { AgentBase } from "./agent.js";
import type { Json } from "./json.js";
import type { ModelRequest, ModelResult, ModelUsage, TetherModel } from "./model.js";
import type { CheckResult, CompensationContext, Tool } from "./tool.js";

/**
 * Async-function agents. The agent is a plain `async (ctx, input) => output`; every call that
 * costs money or touches the world goes through `ctx` and is a gate with the promises of a step
 * machine's calls: control checked before it starts, `call.started` journaled with its
 * idempotency key, its result journaled (and appended to the run's snapshot) in one transaction,
 * pause and cancel reaching it through its signal.
 *
 * A pause unwinds the function: the pending gates reject with `PauseSignal`, so a paused run
 * holds nothing in the worker. Resume, in any process, calls the function again from the top;
 * each gate whose result is journaled returns it at once, and the first one without a result
 * proceeds live. Code between gates must therefore be deterministic given the gate results: a
 * gate whose name or input differs from the journal at its position stops the run with
 * `nondeterministic_replay`. `ctx.now()` and `ctx.random()` are journaled so they replay.
 */

/**
 * Thrown by a gate when the run stops executing here (pause, cancel, halt, a lost lease, a
 * divergence from the journal). Let it propagate: `finally` blocks run, and a function that
 * catches it and goes on is refused (its later gates throw it again, and its return value is not
 * taken as the run's output).
 */
export class PauseSignal extends Error {
  override readonly name = "PauseSignal";
  constructor(readonly reason: string) {
    super(`the run stopped executing here (${reason}); let this propagate, the run resumes by calling the agent again`);
  }

  static isInstance(value: unknown): value is PauseSignal {
    return value instanceof PauseSignal || (value instanceof Error && value.name === "PauseSignal");
  }
}

/** A tool call or step that failed; journaled, so replay throws the same error again. */
export class GateFailedError extends Error {
  override readonly name = "GateFailedError";
  constructor(
    readonly gate: string,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What a step's function receives. */
export interface StepContext {
  runId: string;
  /** Deterministic per gate (run id + the gate's position in program order): the same on a retry. */
  idempotencyKey: string;
  /** Fires on an immediate pause or cancel (if the step is `abortable`), a halt or a lost lease. */
  signal: AbortSignal;
  /** The lease's fencing epoch, for services that refuse a zombie worker's late write. */
  fencingToken: number;
  /** A resource the run holds, by name. */
  resource<T = unknown>(name: string): T;
}

export interface StepOptions<T> {
  /** Undo the step's effect when the run is cancelled; receives what the step returned. */
  compensate?(result: T, ctx: CompensationContext): Promise<void> | void;
  /** Safe to run again with the same idempotency key after a crash. */
  idempotent?: boolean;
  /** Ask the world whether the step with this key already happened (after a crash). */
  check?(idempotencyKey: string): Promise<CheckResult<T>> | CheckResult<T>;
  /** Honours its signal: an immediate pause or cancel stops it mid-way (and it runs again on resume). */
  abortable?: boolean;
  /** What the step depends on; compared with the journal on replay. Default: the name alone. */
  input?: Json;
  /**
   * Whether the step's journaled result still holds in the world (the draft it created still
   * exists, the lock is still held), asked when a resumed run replays the step: `true` goes on,
   * a string says what drifted, and the run pauses with `stale_snapshot: …` before any later call
   * is made. A resume with `force` goes on without asking. Not asked on a cancel.
   */
  revalidate?(result: T): Promise<true | string> | true | string;
}

export interface ModelStepOptions<T> {
  /** What the call depends on; compared with the journal on replay. */
  input: Json;
  /** The usage a completed call reports (counted against the budgets and priced). */
  usage(result: T): ModelUsage | undefined;
  /**
   * What a call aborted mid-way (a pause, a cancel) had produced: the text streamed so far, the
   * size of what was sent, and any usage the provider reported. An aborted call still cost
   * tokens: they are counted, estimated from the characters (4 a token) where nothing was reported.
   */
  partial?(): { text: string; inputChars: number; usage?: Partial<ModelUsage> };
}

export interface ModelCallOptions {
  /** The model for this call: a model string (`openai:gpt-4o-mini`, `simulated`) or a model object. Default: the run's. */
  model?: TetherModel | string;
}

export interface DurableContext {
  readonly runId: string;
  /** One model call: streamed, journaled, aborted by an immediate pause or a cancel. */
  model(request: ModelRequest | string, options?: ModelCallOptions): Promise<ModelResult>;
  /** One tool call (a tool of the agent by name, or a tool object); a failure throws `GateFailedError`. */
  tool<I, O>(tool: Tool<I, O>, input: I): Promise<O>;
  tool(name: string, input: Json): Promise<Json>;
  /** Any other call that costs money or touches the world; its result must be JSON. */
  step<T extends Json | void>(name: string, fn: (ctx: StepContext) => Promise<T> | T, options?: StepOptions<T>): Promise<T>;
  /**
   * A model call made by your own client (the AI SDK drop-in uses it): journaled as a model
   * call under `name` (`provider:modelId`), aborted by an immediate pause or a cancel, made again
   * after a crash, its `usage` counted against the run's budgets and priced.
   */
  modelStep<T extends Json>(name: string, fn: (ctx: StepContext) => Promise<T>, options: ModelStepOptions<T>): Promise<T>;
  /**
   * The messages people sent to the run (`say`, `tether say`, `POST /runs/:id/messages`) since the
   * last call, oldest first; delivered once, and journaled, so replay returns the same ones.
   */
  messages(): Promise<{ text: string; author: string }[]>;
  /** The time, journaled: the same value on replay. */
  now(): number;
  /** A number in [0, 1), journaled: the same value on replay. */
  random(): number;
}

/** An async-function agent as the engine runs it; `durableAgent` (src/agents/durable-agent.ts) makes one. */
export interface FunctionAgentDefinition extends AgentBase {
  run(ctx: DurableContext, input: Json): Promise<Json | void>;
  next?: undefined;
}
