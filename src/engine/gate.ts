import { ModelCallError, TetherError } from "./errors.js";
import type { Json } from "./json.js";
import type { ModelRequest, ModelResult, ModelUsage, TetherModel } from "./model.js";
import type { Outcome } from "./agent.js";
import type { AnyTool, ToolContext } from "./tool.js";
import type { ToolCallPart } from "./state.js";

/**
 * What happens inside the gate once a call is journaled as started: the model stream or the
 * tool's execution, with the call's AbortSignal wired through. Journaling lives in the executor.
 */

export type ModelCallOutcome =
  | { type: "completed"; result: ModelResult }
  | { type: "aborted"; usage: ModelUsage; estimated: boolean; text: string }
  | { type: "failed"; error: TetherError; usage: ModelUsage };

/** Tokens a text of `chars` characters is taken to cost when the provider reported none. */
export function estimateTokens(chars: number): number {
  return Math.ceil(chars / 4);
}

function requestChars(request: ModelRequest): number {
  let chars = 0;
  for (const message of request.messages) chars += typeof message.content === "string" ? message.content.length : JSON.stringify(message.content).length;
  return chars;
}

export async function streamModelCall(
  model: TetherModel,
  request: ModelRequest,
  options: { signal: AbortSignal; idempotencyKey: string; onDelta(text: string, offset: number): void },
): Promise<ModelCallOutcome> {
  let text = "";
  const toolCalls: ToolCallPart[] = [];
  let reported: ModelUsage | undefined;
  let finishReason = "unknown";
  let answered = false;
  const partialUsage = (): { usage: ModelUsage; estimated: boolean } => {
    const input = reported?.inputTokens ?? estimateTokens(requestChars(request));
    const output = Math.max(reported?.outputTokens ?? 0, estimateTokens(text.length));
    return {
      usage: { inputTokens: input, outputTokens: output, cachedInputTokens: reported?.cachedInputTokens ?? 0 },
      estimated: reported === undefined || (reported.outputTokens ?? 0) < output,
    };
  };
  // Stopped before it began: nothing was sent, nothing is billed.
  if (options.signal.aborted) return { type: "aborted", text, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }, estimated: false };
  // Read on every part, so kept by a listener: `signal.aborted` is a getter that validates its receiver.
  let aborted = false;
  const onAbort = () => (aborted = true);
  options.signal.addEventListener("abort", onAbort, { once: true });
  try {
    for await (const part of model.stream(request, { signal: options.signal, idempotencyKey: options.idempotencyKey })) {
      // A stream that ignores its signal is cut here: nothing after the abort is used or shown.
      if (aborted) break;
      answered = true;
      switch (part.type) {
        case "text-delta":
          options.onDelta(part.text, text.length);
          text += part.text;
          break;
        case "tool-call":
          toolCalls.push(part.toolCall);
          break;
        case "usage":
          reported = { ...reported, ...part.usage };
          break;
        case "finish":
          finishReason = part.finishReason;
          if (part.usage) reported = { ...reported, ...part.usage };
          break;
      }
    }
  } catch (error) {
    if (options.signal.aborted) return { type: "aborted", text, ...partialUsage() };
    const wrapped = TetherError.isInstance(error) ? error : new ModelCallError(`model ${model.provider}:${model.modelId} failed: ${(error as Error)?.message ?? String(error)}`, undefined, error);
    // Refused before a response stream opened (the adapter says so: no API key, a 401, a 429, a
    // server error): the provider billed nothing, so nothing is counted. Anything else (a stream
    // that broke off, a model of your own that threw) counts the estimate, as a stop does.
    const refused = !answered && wrapped.code === "model_error" && (wrapped.details as { beforeAnswer?: boolean } | undefined)?.beforeAnswer === true;
    if (refused) return { type: "failed", error: wrapped, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 } };
    return { type: "failed", error: wrapped, usage: partialUsage().usage };
  } finally {
    options.signal.removeEventListener("abort", onAbort);
  }
  if (options.signal.aborted) return { type: "aborted", text, ...partialUsage() };
  const usage = partialUsage().usage;
  return { type: "completed", result: { text, toolCalls, finishReason, usage } };
}

export class ToolAbortedError extends Error {
  constructor(readonly reason: unknown) {
    super("tool call aborted");
  }
}

/** Runs a tool: validate input, execute with signal and timeout, validate output. */
export async function executeTool(tool: AnyTool, input: Json, ctx: ToolContext): Promise<Outcome & { type: "tool" }> {
  // The tool gets a copy of its own: what it does to its input (a schema passes nested values
  // through as they are) never reaches the call kept for recovery, the journal or the conversation.
  const parsed = tool.input.safeParse(structuredClone(input));
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(input)"}: ${issue.message}`).join("; ");
    return { type: "tool", ok: false, error: "invalid_input", message: `invalid input for tool ${tool.name}: ${issues}` };
  }
  // Stopped between its `started` and here (a pause that reached the run while `started` was
  // being written): the call never starts. A tool that only listens for the signal's `abort`
  // event would not see a signal that fired before it began, and would run to its end.
  if (ctx.signal.aborted) throw new ToolAbortedError(ctx.signal.reason);
  const signals = [ctx.signal];
  if (tool.timeoutMs !== undefined) signals.push(AbortSignal.timeout(tool.timeoutMs));
  const signal = signals.length === 1 ? ctx.signal : AbortSignal.any(signals);
  try {
    const output = await tool.execute(parsed.data, { ...ctx, signal });
    if (tool.output) {
      const checked = tool.output.safeParse(output);
      if (!checked.success) {
        return { type: "tool", ok: false, error: "tool_error", message: `tool ${tool.name} returned output that does not match its schema: ${checked.error.message}` };
      }
    }
    return { type: "tool", ok: true, output: (output ?? null) as Json };
  } catch (error) {
    if (ctx.signal.aborted) throw new ToolAbortedError(ctx.signal.reason);
    if (signal.aborted) return { type: "tool", ok: false, error: "timeout", message: `tool ${tool.name} timed out after ${tool.timeoutMs} ms` };
    if (TetherError.isInstance(error) && error.code === "tool_unavailable") throw error;
    const message = error instanceof Error ? error.message : String(error);
    return { type: "tool", ok: false, error: "tool_error", message: `tool ${tool.name} failed: ${message}` };
  }
}

