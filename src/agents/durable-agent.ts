import type { z } from "zod";
import { checkAgentName, type AgentBase } from "../engine/agent.js";
import { InvalidInputError } from "../engine/errors.js";
import type { DurableContext, FunctionAgentDefinition } from "../engine/function-agent.js";
import type { Json } from "../engine/json.js";
import type { AgentState } from "../engine/state.js";
import { aiSdkGates, type AiSdkGates } from "../models/ai-sdk-gates.js";

/** What an async-function agent's `run` receives: the engine's gates, and the AI SDK drop-in. */
export interface AgentContext extends DurableContext {
  /** `ctx.aiSdk.model(openai("gpt-4o"))` and `ctx.aiSdk.tools({ ... })`: an AI SDK loop whose every call is a gate. */
  readonly aiSdk: AiSdkGates;
}

/**
 * Not `onStale` or `vars`: an async-function agent's state is the log of its gates' results, not
 * something to refresh or patch. A stale run is refused (`staleAfterMs`, tools' `revalidate`) or
 * paused when a replayed step's `revalidate` says it drifted; `resume --force` goes on.
 */
export interface DurableAgentOptions<I extends Json = Json> extends Omit<AgentBase, "init" | "input" | "version" | "onStale" | "vars"> {
  /** Default "1". */
  version?: string;
  /** Validates `start`'s input; `run` receives what it parsed. */
  input?: z.ZodType<I>;
  run(ctx: AgentContext, input: I): Promise<Json | void>;
}

/**
 * An agent written as a plain async function (docs/async-function-agents.md). Every call that
 * costs money or touches the world goes through `ctx` (`ctx.model`, `ctx.tool`, `ctx.step`,
 * `ctx.aiSdk`); the code between them must be deterministic given their results, because a
 * resume calls `run` again from the top and replays the journaled results.
 */
export function durableAgent<I extends Json = Json>(options: DurableAgentOptions<I>): FunctionAgentDefinition {
  checkAgentName(options.name);
  for (const key of ["onStale", "vars"] as const) {
    if (key in options) throw new InvalidInputError(`agent ${options.name}: durableAgent takes no ${key} (its state is the log of its calls' results); use staleAfterMs, a tool's or step's revalidate, and resume --force`);
  }
  const { run, input, ...rest } = options;
  return {
    ...rest,
    version: options.version ?? "1",
    input: input as z.ZodType<Json> | undefined,
    // The run's snapshot holds the journaled gate results (one message each), nothing else.
    init: (): AgentState => ({ messages: [], vars: {} }),
    run: (ctx, value) => run(Object.assign(ctx, { aiSdk: aiSdkGates(ctx) }), value as I),
  };
}
