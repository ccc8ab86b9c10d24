import type {
  JSONSchema7,
  JSONValue,
  LanguageModelV3CallOptions,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3ToolResultOutput,
  LanguageModelV3Usage,
} from "@ai-sdk/provider";
import type { Json } from "../engine/json.js";
import type { ModelStreamPart, ModelUsage, ToolSpec } from "../engine/model.js";
import type { Message } from "../engine/state.js";

/**
 * Everything that depends on the AI SDK's provider specification v3 (`@ai-sdk/provider` 3.x,
 * AI SDK 6) lives here, so the adapter in `ai-sdk-model.ts` stays version-neutral.
 *
 * For AI SDK 7 (`@ai-sdk/provider` 4.x, `LanguageModelV4`, `specificationVersion: "v4"`) a
 * sibling `ai-sdk-v4.ts` with the same three functions is what changes: the V4 prompt and
 * stream-part unions (new parts such as `reasoning-file`, tool outputs such as
 * `file-reference`), and the usage shape if it moves. `aiSdkModel` then picks the mapping by
 * `specificationVersion`.
 */

export const specificationVersion = "v3";

/** Tether messages → the provider prompt. Consecutive tool results become one `tool` message. */
export function toPrompt(messages: readonly Message[]): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Prompt = [];
  for (const message of messages) {
    switch (message.role) {
      case "system":
        prompt.push({ role: "system", content: message.content });
        break;
      case "user":
        prompt.push({ role: "user", content: [{ type: "text", text: message.content }] });
        break;
      case "assistant": {
        const content: Extract<LanguageModelV3Message, { role: "assistant" }>["content"] = [];
        if (message.content) content.push({ type: "text", text: message.content });
        for (const call of message.toolCalls ?? []) content.push({ type: "tool-call", toolCallId: call.toolCallId, toolName: call.toolName, input: call.input });
        if (!content.length) content.push({ type: "text", text: "" });
        prompt.push({ role: "assistant", content });
        break;
      }
      case "tool": {
        const part = { type: "tool-result" as const, toolCallId: message.toolCallId, toolName: message.toolName, output: toolOutput(message.content, message.isError === true) };
        const last = prompt[prompt.length - 1];
        if (last?.role === "tool") last.content.push(part);
        else prompt.push({ role: "tool", content: [part] });
        break;
      }
    }
  }
  return prompt;
}

function toolOutput(content: Json, isError: boolean): LanguageModelV3ToolResultOutput {
  if (typeof content === "string") return isError ? { type: "error-text", value: content } : { type: "text", value: content };
  return isError ? { type: "error-json", value: content as JSONValue } : { type: "json", value: content as JSONValue };
}

export function toTools(tools: readonly ToolSpec[]): Pick<LanguageModelV3CallOptions, "tools" | "toolChoice"> {
  if (!tools.length) return {};
  const functions: LanguageModelV3FunctionTool[] = tools.map((t) => ({ type: "function", name: t.name, description: t.description, inputSchema: t.inputSchema as JSONSchema7 }));
  return { tools: functions, toolChoice: { type: "auto" } };
}

/** Usage only when the provider reported both counts; otherwise the gate estimates it. */
export function toUsage(usage: LanguageModelV3Usage | undefined): ModelUsage | undefined {
  const input = usage?.inputTokens.total;
  const output = usage?.outputTokens.total;
  if (input === undefined || output === undefined) return undefined;
  const cached = usage?.inputTokens.cacheRead;
  return { inputTokens: input, outputTokens: output, ...(cached ? { cachedInputTokens: cached } : {}) };
}

/** A tool call's JSON-encoded input; text that is not JSON is kept, so the tool's validation reports it. */
function parseToolInput(input: string): Json {
  if (input.trim() === "") return {};
  try {
    return JSON.parse(input) as Json;
  } catch {
    return input;
  }
}

export type MappedPart = ModelStreamPart | { type: "error"; error: unknown } | undefined;

/**
 * One provider stream part → one Tether part. Text-start/end, reasoning, tool-input deltas
 * and metadata carry nothing the gate uses: the complete `tool-call` follows its deltas.
 */
export function fromStreamPart(part: LanguageModelV3StreamPart): MappedPart {
  switch (part.type) {
    case "text-delta":
      return part.delta ? { type: "text-delta", text: part.delta } : undefined;
    case "tool-call":
      // A tool the provider ran itself (web search, …) already has its result in the stream.
      if (part.providerExecuted) return undefined;
      return { type: "tool-call", toolCall: { toolCallId: part.toolCallId, toolName: part.toolName, input: parseToolInput(part.input) } };
    case "finish": {
      const usage = toUsage(part.usage);
      return { type: "finish", finishReason: part.finishReason.unified, ...(usage ? { usage } : {}) };
    }
    case "error":
      return { type: "error", error: part.error };
    default:
      return undefined;
  }
}
