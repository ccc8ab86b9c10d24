import type { z } from "zod";
import type { Json } from "./json.js";
import type { ModelRequest, ModelResult, TetherModel } from "./model.js";
import type { AnyResource } from "./resource.js";
import type { AgentState } from "./state.js";
import type { AnyTool } from "./tool.js";
import type { Budgets } from "./budgets.js";
import type { FunctionAgentDefinition } from "./function-agent.js";

/** What the agent wants to do next; every `model` and `tool` action passes the call gate. */
export type Action =
  /** `model` picks this call's model (a model string or object); default: the run's, else the agent's. */
  | { type: "model"; request: ModelRequest; model?: TetherModel | string }
  | { type: "tool"; toolCallId: string; toolName: string; input: Json }
  | { type: "done"; output: Json };

export type ToolOutcomeError = "invalid_input" | "tool_error" | "timeout" | "unknown_tool" | "skipped" | "rejected";

export type Outcome =
  | { type: "model"; result: ModelResult }
  | { type: "tool"; ok: true; output: Json }
  | { type: "tool"; ok: false; error: ToolOutcomeError; message: string };

/**
 * `apply` may say which new message records the outcome verbatim; the journal then points at
 * that message instead of storing the same bytes twice.
 */
export type ApplyResult = void | { recordedInMessage: number };

/** What every kind of agent declares: its name and version, tools, resources, model, budgets, input and stale rules. */
export interface AgentBase {
  name: string;
  version: string;
  description?: string;
  tools?: readonly AnyTool[];
  resources?: readonly AnyResource[];
  /** A model object or a model string (`simulated`, `openai:gpt-4o-mini`, …); the run may override it. */
  model?: TetherModel | string;
  budgets?: Budgets;
  /** Input validation for `start`. */
  input?: z.ZodType<Json>;
  /** Validation of `vars` after a human state patch. */
  vars?: z.ZodType<unknown>;
  /** A snapshot older than this refuses to resume with `stale_snapshot` unless forced. */
  staleAfterMs?: number;
  /** Refresh a stale state instead of refusing; return the refreshed state. */
  onStale?(state: AgentState, reasons: string[]): Promise<AgentState> | AgentState;
  /**
   * Versions of this agent whose paused runs this version may continue: exact versions (`"1.2.0"`)
   * or patterns (`"1.x"`, `"1.2.x"`). A run started under any other version is refused with
   * `version_mismatch` (fork it onto this version instead). Default: only its own version.
   */
  compatibleWith?: readonly string[];
  init(input: Json): AgentState;
}

/**
 * An agent's own step logic: `next` plans one call from the state, `apply` folds its outcome
 * into the state. Between the two the runtime journals the call, so a step is never half-done:
 * the outcome and the new snapshot are written in one transaction.
 */
export interface StepAgentDefinition extends AgentBase {
  run?: undefined;
  next(state: Readonly<AgentState>): Action;
  /**
   * Optional: the tool calls the agent will make next, in order, starting with the one `next`
   * returns (the rest of one model turn). When one of them needs a person's approval, the run
   * asks for every such call of the turn at once, and continues once all are decided.
   */
  upcomingToolCalls?(state: Readonly<AgentState>): (Action & { type: "tool" })[];
  /**
   * Optional: whether the tool calls `upcomingToolCalls` lists may run at once. `true` (up to 8
   * in flight), a number (that many at most), or `false`/absent: one after another. Each call is
   * still journaled, committed and keyed on its own, in the turn's order; a call that may need
   * approval is never started alongside others.
   */
  parallelToolCalls?: boolean | number;
  apply(state: AgentState, action: Action, outcome: Outcome): ApplyResult;
}

/** A step machine (`defineAgent`, the tool loop) or an async function (`durableAgent`, function-agent.ts). */
export type AgentDefinition = StepAgentDefinition | FunctionAgentDefinition;

export function isFunctionAgent(agent: AgentDefinition): agent is FunctionAgentDefinition {
  return typeof agent.run === "function";
}

export function checkAgentName(name: string): void {
  if (!/^[a-z0-9][a-z0-9._-]{0,63}$/i.test(name)) {
    throw new TypeError(`agent name "${name}" must be 1-64 letters, digits, ".", "_" or "-"`);
  }
}

export function defineAgent(definition: StepAgentDefinition): StepAgentDefinition {
  checkAgentName(definition.name);
  return definition;
}

