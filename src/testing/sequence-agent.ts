import { defineAgent, type AgentDefinition } from "../engine/agent.js";
import type { Budgets } from "../engine/budgets.js";
import type { Json } from "../engine/json.js";
import type { AnyResource } from "../engine/resource.js";
import type { AnyTool } from "../engine/tool.js";

export interface SequenceAgentOptions {
  name: string;
  tools: readonly AnyTool[];
  /** The tool calls, in order; the run completes after the last one. */
  steps: readonly { tool: string; input: Json }[];
  resources?: readonly AnyResource[];
  budgets?: Budgets;
  staleAfterMs?: number;
  onStale?: AgentDefinition["onStale"];
}

/**
 * An agent that makes a fixed list of tool calls, one per step, without a model: what a test
 * needs to know exactly which call is in flight. Each result is appended as a tool message;
 * the output is the number of calls made.
 */
export function sequenceAgent(options: SequenceAgentOptions): AgentDefinition {
  return defineAgent({
    name: options.name,
    version: "1",
    tools: options.tools,
    resources: options.resources,
    budgets: options.budgets,
    staleAfterMs: options.staleAfterMs,
    onStale: options.onStale,
    init: () => ({ messages: [], vars: { index: 0 } }),
    next(state) {
      const index = Number(state.vars.index);
      const step = options.steps[index];
      if (!step) return { type: "done", output: index };
      return { type: "tool", toolCallId: `step-${index}`, toolName: step.tool, input: step.input };
    },
    apply(state, action, outcome) {
      if (action.type !== "tool" || outcome.type !== "tool") return;
      const content: Json = outcome.ok ? outcome.output : { error: outcome.error, message: outcome.message };
      state.messages.push({ role: "tool", toolCallId: action.toolCallId, toolName: action.toolName, content, ...(outcome.ok ? {} : { isError: true }) });
      state.vars = { ...state.vars, index: Number(state.vars.index) + 1 };
      return { recordedInMessage: state.messages.length - 1 };
    },
  });
}
