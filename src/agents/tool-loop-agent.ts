import { z } from "zod";
import { defineAgent, type Action, type AgentDefinition, type Outcome } from "../engine/agent.js";
import type { Budgets } from "../engine/budgets.js";
import type { Json } from "../engine/json.js";
import type { TetherModel, ToolSpec } from "../engine/model.js";
import type { AnyResource } from "../engine/resource.js";
import type { AgentState, Message } from "../engine/state.js";
import type { AnyTool } from "../engine/tool.js";

export interface ToolLoopAgentOptions {
  name: string;
  version?: string;
  description?: string;
  system?: string;
  model?: TetherModel | string;
  tools?: readonly AnyTool[];
  resources?: readonly AnyResource[];
  /** Model turns before the agent stops with what it has. Default 20. */
  maxTurns?: number;
  budgets?: Budgets;
  staleAfterMs?: number;
  onStale?: AgentDefinition["onStale"];
  vars?: z.ZodType<unknown>;
  /** Extra vars of a new run. */
  initialVars?: (input: { prompt: string }) => Record<string, Json>;
  /**
   * Run the tool calls of one model turn at once: `true` (the default) runs up to 8 in flight,
   * a number sets that limit, `false` runs them one after another. Each call is journaled and
   * committed on its own as it finishes; pause aborts every abortable call in flight and waits
   * for the others. A tool that may need approval never starts alongside others.
   */
  parallelToolCalls?: boolean | number;
}

export const toolLoopInput = z.union([z.string().min(1), z.object({ prompt: z.string().min(1) }).strict()]);

function promptOf(input: Json): string {
  return typeof input === "string" ? input : String((input as { prompt: string }).prompt);
}

/** The tool call of the newest assistant turn that has no result yet. */
export function pendingToolCall(messages: readonly Message[]): { toolCallId: string; toolName: string; input: Json } | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role !== "assistant") continue;
    if (!message.toolCalls?.length) return undefined;
    const answered = new Set<string>();
    for (let j = i + 1; j < messages.length; j++) {
      const later = messages[j];
      if (later.role === "tool") answered.add(later.toolCallId);
    }
    return message.toolCalls.find((call) => !answered.has(call.toolCallId));
  }
  return undefined;
}

/** Every tool call of the newest assistant turn that has no result yet, in order. */
export function pendingToolCalls(messages: readonly Message[]): { toolCallId: string; toolName: string; input: Json }[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role !== "assistant") continue;
    if (!message.toolCalls?.length) return [];
    const answered = new Set<string>();
    for (let j = i + 1; j < messages.length; j++) {
      const later = messages[j];
      if (later.role === "tool") answered.add(later.toolCallId);
    }
    return message.toolCalls.filter((call) => !answered.has(call.toolCallId));
  }
  return [];
}

/**
 * The conversation as the model is shown it: the results of each turn's tool calls in the order
 * the model asked for them. Calls of one turn run at once and their results are kept in the order
 * they finished; the model's view does not depend on that timing, so an interrupted or forked run
 * asks the model the same as an uninterrupted one. The same array when nothing is out of order.
 */
export function resultsInCallOrder(messages: readonly Message[]): readonly Message[] {
  let out: Message[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message.role !== "assistant" || !message.toolCalls || message.toolCalls.length < 2) continue;
    let end = i + 1;
    while (end < messages.length && messages[end].role === "tool") end++;
    const results = messages.slice(i + 1, end) as Extract<Message, { role: "tool" }>[];
    const position = new Map(message.toolCalls.map((call, index) => [call.toolCallId, index]));
    const rank = (m: Extract<Message, { role: "tool" }>) => position.get(m.toolCallId) ?? Number.MAX_SAFE_INTEGER;
    if (results.every((m, k) => k === 0 || rank(results[k - 1]) <= rank(m))) continue;
    out ??= [...messages];
    const sorted = results.map((m, k) => ({ m, k })).sort((x, y) => rank(x.m) - rank(y.m) || x.k - y.k);
    for (let k = 0; k < sorted.length; k++) out[i + 1 + k] = sorted[k].m;
    i = end - 1;
  }
  return out ?? messages;
}

/**
 * The model turns a conversation holds: its assistant messages. The loop counts them instead of
 * keeping a counter in the user's vars, which a strict vars schema would refuse and a patch could overwrite.
 */
export function modelTurns(messages: readonly Message[]): number {
  let turns = 0;
  for (const message of messages) if (message.role === "assistant") turns++;
  return turns;
}

/**
 * The built-in tool-calling loop: model → tool calls → model … until the model answers
 * without calling a tool, or `maxTurns` is reached. Each model call and each tool call is one
 * step, journaled and snapshotted on its own; the tool calls of one turn run at once
 * (`parallelToolCalls`), their results appended in the order they finish.
 */
export function toolLoopAgent(options: ToolLoopAgentOptions): AgentDefinition {
  const tools = options.tools ?? [];
  const specs: ToolSpec[] = tools.map((t) => t.spec);
  const maxTurns = options.maxTurns ?? 20;
  const parallel = options.parallelToolCalls ?? true;
  if (typeof parallel === "number" && (!Number.isInteger(parallel) || parallel < 1)) {
    throw new TypeError(`toolLoopAgent ${options.name}: parallelToolCalls must be true, false or a whole number of calls at least 1 (got ${parallel})`);
  }
  return defineAgent({
    name: options.name,
    version: options.version ?? "1",
    description: options.description,
    tools,
    resources: options.resources,
    model: options.model,
    budgets: options.budgets,
    staleAfterMs: options.staleAfterMs,
    onStale: options.onStale,
    vars: options.vars,
    input: toolLoopInput as unknown as z.ZodType<Json>,
    parallelToolCalls: parallel,
    init(input: Json): AgentState {
      const prompt = promptOf(input);
      const messages: Message[] = [];
      if (options.system) messages.push({ role: "system", content: options.system });
      messages.push({ role: "user", content: prompt });
      return { messages, vars: { ...options.initialVars?.({ prompt }) } };
    },
    next(state): Action {
      const pending = pendingToolCall(state.messages);
      if (pending) return { type: "tool", toolCallId: pending.toolCallId, toolName: pending.toolName, input: pending.input };
      const last = state.messages[state.messages.length - 1];
      if (last?.role === "assistant") return { type: "done", output: last.content };
      if (modelTurns(state.messages) >= maxTurns) {
        const lastText = [...state.messages].reverse().find((m) => m.role === "assistant");
        return { type: "done", output: lastText?.content ?? `stopped after ${maxTurns} turns` };
      }
      return { type: "model", request: { messages: resultsInCallOrder(state.messages), tools: specs } };
    },
    upcomingToolCalls(state) {
      return pendingToolCalls(state.messages).map((call) => ({ type: "tool" as const, toolCallId: call.toolCallId, toolName: call.toolName, input: call.input }));
    },
    apply(state: AgentState, action: Action, outcome: Outcome) {
      if (outcome.type === "model") {
        const { text, toolCalls } = outcome.result;
        state.messages.push(toolCalls.length ? { role: "assistant", content: text, toolCalls } : { role: "assistant", content: text });
        return { recordedInMessage: state.messages.length - 1 };
      }
      if (action.type !== "tool") return;
      const content: Json = outcome.ok ? outcome.output : { error: outcome.error, message: outcome.message };
      state.messages.push(
        outcome.ok
          ? { role: "tool", toolCallId: action.toolCallId, toolName: action.toolName, content }
          : { role: "tool", toolCallId: action.toolCallId, toolName: action.toolName, content, isError: true },
      );
      return { recordedInMessage: state.messages.length - 1 };
    },
  });
}
