import type { Json } from "./json.js";
import type { Message, ToolCallPart } from "./state.js";

/**
 * The model contract: small enough that an AI SDK `LanguageModel` adapts to it in one file.
 * A model streams parts; the gate counts tokens as they arrive so an aborted call is billed
 * for what it streamed.
 */
export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the tool's input. */
  inputSchema: Json;
}

export interface ModelRequest {
  messages: readonly Message[];
  tools: readonly ToolSpec[];
}

export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens?: number;
}

export type ModelStreamPart =
  | { type: "text-delta"; text: string }
  | { type: "tool-call"; toolCall: ToolCallPart }
  /** Usage so far; a model may send it early (input tokens) and again at the end. */
  | { type: "usage"; usage: ModelUsage }
  | { type: "finish"; finishReason: string; usage?: ModelUsage };

export interface ModelCallOptions {
  signal: AbortSignal;
  idempotencyKey: string;
}

export interface TetherModel {
  readonly specificationVersion: "tether-model-v1";
  /** Provider name, such as "simulated", "openai" or "anthropic". */
  readonly provider: string;
  readonly modelId: string;
  stream(request: ModelRequest, options: ModelCallOptions): AsyncIterable<ModelStreamPart>;
}

export interface ModelResult {
  text: string;
  toolCalls: ToolCallPart[];
  finishReason: string;
  usage: ModelUsage;
}

export function modelKey(model: Pick<TetherModel, "provider" | "modelId">): string {
  return `${model.provider}:${model.modelId}`;
}
