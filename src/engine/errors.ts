/**
 * One base class, one subclass per condition. The `code` is stable and travels out through
 * HTTP (`{"error":{"code","message","details"}}`) and CLI exit codes; the HTTP client throws the
 * same classes (`src/client/received-error.ts`), and `details` is typed per code (`ErrorDetails`).
 */
import type { ErrorDetails, InheritedEffectDetail, InheritingForkDetail, InputIssue } from "./error-details.js";

export type { ErrorDetails, InheritedEffectDetail, InheritingForkDetail, InputIssue } from "./error-details.js";

const marker = Symbol.for("tether.error");

export const errorCodes = [
  "run_not_found",
  "illegal_transition",
  "stale_snapshot",
  "snapshot_corrupt",
  "invalid_state_patch",
  "invalid_input",
  "unknown_agent",
  "unknown_model",
  "unknown_tool",
  "uncertain_effect",
  "halted",
  "budget_exceeded",
  "already_decided",
  "no_pending_approval",
  "approval_pending",
  "version_mismatch",
  "fork_inherits_effects",
  "lease_lost",
  "unauthorized",
  "forbidden",
  "host_refused",
  "origin_refused",
  "unsupported_media_type",
  "auth_not_configured",
  "tokens_missing",
  "payload_too_large",
  "model_error",
  "tool_error",
  "tool_unavailable",
  "store_error",
  "store_too_new",
  "store_corrupt",
  "store_limit",
  "wait_timeout",
  "not_found",
  "missing_dependency",
  "internal_error",
  "unreachable",
  "http_error",
] as const satisfies readonly (keyof ErrorDetails)[];

export type ErrorCode = (typeof errorCodes)[number];

export interface TetherErrorOptions {
  cause?: unknown;
  /** The HTTP status the error came with, when `TetherClient` received it (0: the server was not reached). */
  status?: number;
}

export class TetherError<C extends ErrorCode = ErrorCode> extends Error {
  readonly [marker] = true;
  readonly code: C;
  readonly details: ErrorDetails[C];
  /** The HTTP status, on an error `TetherClient` received (0 when the server could not be reached); undefined when thrown in this process. */
  readonly status: number | undefined;

  constructor(code: C, message: string, details?: ErrorDetails[C], options?: TetherErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TetherError";
    this.code = code;
    this.details = details as ErrorDetails[C];
    this.status = options?.status;
  }

  /**
   * Survives duplicate copies of the package, unlike `instanceof`. With a `code`, also narrows
   * `details` to that code's shape.
   */
  static isInstance<C extends ErrorCode = ErrorCode>(value: unknown, code?: C): value is TetherError<C> {
    if (typeof value !== "object" || value === null || (value as Record<symbol, unknown>)[marker] !== true) return false;
    return code === undefined || (value as TetherError).code === code;
  }

  toJSON(): { code: C; message: string; details?: ErrorDetails[C] } {
    return this.details ? { code: this.code, message: this.message, details: this.details } : { code: this.code, message: this.message };
  }
}

/** Issues as zod reports them (`path` a list) or already joined, as `details.issues` carries them. */
function inputIssues(issues: readonly { path: string | readonly PropertyKey[]; message: string }[] | undefined): { issues: InputIssue[] } | undefined {
  if (issues === undefined) return undefined;
  return { issues: issues.map((i) => ({ path: typeof i.path === "string" ? i.path : i.path.map(String).join("."), message: i.message })) };
}

export class RunNotFoundError extends TetherError<"run_not_found"> {
  constructor(runId: string) {
    super("run_not_found", `run ${runId} does not exist`, { runId });
    this.name = "RunNotFoundError";
  }
}

export class IllegalTransitionError extends TetherError<"illegal_transition"> {
  constructor(runId: string, command: string, currentStatus: string, hint?: string) {
    super("illegal_transition", `cannot ${command} run ${runId}: it is ${currentStatus}${hint ? `; ${hint}` : ""}`, { runId, command, currentStatus });
    this.name = "IllegalTransitionError";
  }
}

export class StaleSnapshotError extends TetherError<"stale_snapshot"> {
  constructor(runId: string, reasons: string[]) {
    super("stale_snapshot", `run ${runId} has a stale snapshot: ${reasons.join("; ")} (refresh it, or resume with force)`, { runId, reasons });
    this.name = "StaleSnapshotError";
  }
}

export class SnapshotCorruptError extends TetherError<"snapshot_corrupt"> {
  constructor(runId: string, problem: string) {
    super("snapshot_corrupt", `run ${runId} cannot resume: its snapshot is corrupt (${problem}); nothing was deleted`, { runId, problem });
    this.name = "SnapshotCorruptError";
  }
}

/** Rows of a store that fail their checksum or cannot be read: reported, never deleted or repaired. */
export class StoreCorruptError extends TetherError<"store_corrupt"> {
  constructor(location: string, problem: string, details: Record<string, unknown> = {}) {
    super("store_corrupt", `the store at ${location} is damaged: ${problem}; nothing was deleted (\`tether verify\` lists every damaged row)`, { location, problem, ...details });
    this.name = "StoreCorruptError";
  }
}

export class InvalidStatePatchError extends TetherError<"invalid_state_patch"> {
  constructor(message: string, issues?: readonly { path: string | readonly PropertyKey[]; message: string }[]) {
    super("invalid_state_patch", message, inputIssues(issues));
    this.name = "InvalidStatePatchError";
  }
}

export class InvalidInputError extends TetherError<"invalid_input"> {
  constructor(message: string, issues?: readonly { path: string | readonly PropertyKey[]; message: string }[]) {
    super("invalid_input", message, inputIssues(issues));
    this.name = "InvalidInputError";
  }
}

export class UnknownAgentError extends TetherError<"unknown_agent"> {
  /**
   * `source`: where the process that refused got its agents (`tether.config.ts`, an `--agents`
   * module, the bundled examples), when it loaded them from a file rather than from code.
   */
  constructor(name: string, known: string[], source?: string) {
    const knownList = known.join(", ") || "none";
    super(
      "unknown_agent",
      source === undefined
        ? `no agent named "${name}" is registered (known: ${knownList}). Register it with createTether({ agents: [...] }); for the CLI, export it from tether.config.ts or pass --agents <file>`
        : `no agent named "${name}" is registered (known: ${knownList}; loaded from ${source}). Export it from tether.config.ts next to your package.json (export default [myAgent]) or pass --agents <file>; tether serve loads agents when it starts`,
      source === undefined ? { name, known } : { name, known, source },
    );
    this.name = "UnknownAgentError";
  }
}

export class UnknownModelError extends TetherError<"unknown_model"> {
  constructor(spec: string, providers: string[]) {
    super("unknown_model", `unknown model "${spec}"; providers: ${providers.join(", ")}`, { spec, providers });
    this.name = "UnknownModelError";
  }
}

export class UncertainEffectError extends TetherError<"uncertain_effect"> {
  constructor(runId: string, callSeq: number, toolName: string) {
    super(
      "uncertain_effect",
      `run ${runId} has an uncertain effect: tool ${toolName} (call ${callSeq}) may or may not have happened; resume with resolve: "retry", "skip" or "done"`,
      { runId, callSeq, toolName },
    );
    this.name = "UncertainEffectError";
  }
}

export class HaltedError extends TetherError<"halted"> {
  constructor(scope: string) {
    super("halted", `a halt is in force (${scope}); no run starts until it is lifted`, { scope });
    this.name = "HaltedError";
  }
}

/** A command on a run the kill switch holds: the same code, `halted`, as a start refused by a halt. */
export class RunHaltedError extends TetherError<"halted"> {
  constructor(runId: string, command: string) {
    super("halted", `cannot ${command} run ${runId}: it is halted (the kill switch); lift the halt (unhalt), which leaves it paused, then ${command} it`, { runId, command, currentStatus: "halted" });
    this.name = "RunHaltedError";
  }
}

export class LeaseLostError extends TetherError<"lease_lost"> {
  constructor(runId: string) {
    super("lease_lost", `this worker no longer holds run ${runId}`, { runId });
    this.name = "LeaseLostError";
  }
}

export class ModelCallError extends TetherError<"model_error"> {
  constructor(message: string, details?: ErrorDetails["model_error"], cause?: unknown) {
    super("model_error", message, details, { cause });
    this.name = "ModelCallError";
  }
}

/**
 * A feature needs an optional package that is not installed (a model provider, the MCP SDK, the
 * AI SDK, tsx for a TypeScript config, playwright-core): the message says what to `npm install`.
 */
export class MissingDependencyError extends TetherError<"missing_dependency"> {
  constructor(packageName: string, feature: string, install: string, cause?: unknown) {
    super("missing_dependency", `${feature} needs the package ${packageName}, which is not installed: run \`npm install ${install}\``, { package: packageName, feature, install: `npm install ${install}` }, { cause });
    this.name = "MissingDependencyError";
  }
}

/**
 * Thrown by a tool whose backend went away (an MCP server that died, a lost connection): the
 * call fails, the state does not advance, and the run pauses so a person can fix it and resume.
 */
export class ToolUnavailableError extends TetherError<"tool_unavailable"> {
  constructor(toolName: string, message: string, cause?: unknown) {
    super("tool_unavailable", `tool ${toolName} is unavailable: ${message}`, { toolName }, { cause });
    this.name = "ToolUnavailableError";
  }
}

export class WaitTimeoutError extends TetherError<"wait_timeout"> {
  constructor(runId: string, timeoutMs: number, status: string) {
    super("wait_timeout", `timed out after ${timeoutMs} ms waiting for run ${runId} (it is ${status})`, { runId, timeoutMs, status });
    this.name = "WaitTimeoutError";
  }
}

/** A resume of a run paused by a budget that the run still exceeds: it would pause again at once. */
export class BudgetExceededError extends TetherError<"budget_exceeded"> {
  constructor(runId: string, budget: string) {
    super(
      "budget_exceeded",
      `cannot resume run ${runId}: it still exceeds its budget (${budget}) and would pause again at once; raise the budget in the same resume (budgets: { maxSteps: … } / --max-steps, --max-tokens, --max-cost, --max-time)`,
      { runId, budget },
    );
    this.name = "BudgetExceededError";
  }
}

/** A second decision on an uncertain call that a person already decided. */
export class AlreadyDecidedError extends TetherError<"already_decided"> {
  constructor(runId: string, callSeq: number, decision: string, actor: string) {
    super("already_decided", `call ${callSeq} of run ${runId} was already decided (${decision}, by ${actor}); a decision is final`, { runId, callSeq, decision, actor });
    this.name = "AlreadyDecidedError";
  }
}

/** A decision on a run that has no call waiting for approval (or none with that call sequence). */
export class NoPendingApprovalError extends TetherError<"no_pending_approval"> {
  constructor(runId: string, callSeq?: number, pending: number[] = [], status?: string) {
    const now = status ? ` (it is ${status})` : "";
    super(
      "no_pending_approval",
      callSeq === undefined
        ? `run ${runId} has no call waiting for approval${now}`
        : `call ${callSeq} of run ${runId} is not waiting for approval${pending.length ? `; waiting: call ${pending.join(", ")}` : now}`,
      { runId, ...(callSeq !== undefined ? { callSeq } : {}), pending, ...(status ? { status } : {}) },
    );
    this.name = "NoPendingApprovalError";
  }
}

/** A resume of a run whose calls still wait for a person's approval: approve or reject them instead. */
export class ApprovalPendingError extends TetherError<"approval_pending"> {
  constructor(runId: string, pending: { callSeq: number; tool: string }[]) {
    super(
      "approval_pending",
      `cannot resume run ${runId}: ${pending.map((p) => `${p.tool} (call ${p.callSeq})`).join(", ")} ${pending.length === 1 ? "waits" : "wait"} for approval; approve or reject ${pending.length === 1 ? "it" : "each"} (approve / reject, \`tether approve\`, \`tether reject --note\`), and the run continues once all are decided`,
      { runId, pending },
    );
    this.name = "ApprovalPendingError";
  }
}

/** A paused run started under another version of its agent than the one that would continue it. */
export class VersionMismatchError extends TetherError<"version_mismatch"> {
  constructor(runId: string, agent: string, runVersion: string, currentVersion: string, command = "resume") {
    super(
      "version_mismatch",
      `cannot ${command} run ${runId}: it was started by ${agent} version ${runVersion}, and this code has version ${currentVersion}; declare the change compatible (compatibleWith: ["${runVersion}"] on the agent) or fork the run onto version ${currentVersion} (fork(id, { fromStep, currentVersion: true }), \`tether fork ${runId} --from <step> --current-version\`)`,
      { runId, agent, runVersion, currentVersion },
    );
    this.name = "VersionMismatchError";
  }
}

/** A cancel that would undo effects a live fork inherited, without saying whether to: compensate them anyway, or keep them. */
export class ForkInheritsEffectsError extends TetherError<"fork_inherits_effects"> {
  constructor(runId: string, forks: InheritingForkDetail[], effects: InheritedEffectDetail[]) {
    const forkList = forks.map((f) => `${f.runId} (${f.status}, from step ${f.fromStep})`).join(", ");
    const effectList = effects.map((e) => `${e.tool} (call ${e.callSeq})`).join(", ");
    super(
      "fork_inherits_effects",
      `cannot cancel run ${runId} without a choice: ${forks.length === 1 ? "its live fork" : "its live forks"} ${forkList} inherited ${effectList}, which a cancel would undo; cancel with inherited: "compensate" to undo ${effects.length === 1 ? "it" : "them"} anyway, or inherited: "keep" to leave ${effects.length === 1 ? "it" : "them"} for the forks (\`tether cancel ${runId} --inherited compensate|keep\`)`,
      { runId, forks, effects },
    );
    this.name = "ForkInheritsEffectsError";
  }
}
