import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { ModelCallError, TetherError } from "../engine/errors.js";
import type { ModelCallOptions, ModelRequest, ModelStreamPart, TetherModel } from "../engine/model.js";
import * as v3 from "./ai-sdk-v3.js";

// The public types below are Tether's own, shaped like the AI SDK's: the published `.d.ts`
// must not import `@ai-sdk/provider`, an optional peer. `src/optional-peer-types.test.ts` keeps
// them assignable to the real ones.

/**
 * An AI SDK language model (provider specification v3, AI SDK 6): what `openai("gpt-4o")`,
 * `anthropic(...)` or any `LanguageModelV3` is. Only the members Tether uses are named.
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: string;
  readonly provider: string;
  readonly modelId: string;
  doStream(options: never): PromiseLike<{ stream: ReadableStream<unknown> }>;
}

/** A JSON value as the AI SDK's provider options hold it (object members may be undefined). */
export type AiSdkJsonValue = null | string | number | boolean | { [key: string]: AiSdkJsonValue | undefined } | AiSdkJsonValue[];

/** Call settings passed through to every call (the AI SDK's call options but the prompt, tools and signal). */
export interface AiSdkCallSettings {
  maxOutputTokens?: number;
  temperature?: number;
  stopSequences?: string[];
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** `schema` is a JSON Schema (draft 7). */
  responseFormat?: { type: "text" } | { type: "json"; schema?: object; name?: string; description?: string };
  seed?: number;
  includeRawChunks?: boolean;
  headers?: Record<string, string | undefined>;
  /** Per provider: `{ openai: { reasoningEffort: "low" } }`. */
  providerOptions?: Record<string, { [key: string]: AiSdkJsonValue | undefined }>;
}

export interface AiSdkModelOptions {
  /**
   * The provider name in Tether (journal, price key `provider:modelId`). Default: the AI SDK
   * provider id up to its first dot (`openai.chat` → `openai`, `anthropic.messages` → `anthropic`).
   */
  provider?: string;
  /** Default: the AI SDK model id. */
  modelId?: string;
  settings?: AiSdkCallSettings;
}

/**
 * Adapts an AI SDK `LanguageModel` (provider specification v3) to Tether's model contract:
 * the stream is read with the call's AbortSignal, so a pause closes the provider's HTTP
 * response at once, and provider errors (HTTP 401, 429, 500, …) become `ModelCallError`s
 * carrying the provider's message, which the gate journals as `call.failed` and the run
 * pauses with reason `model_error`.
 */
export function aiSdkModel(languageModel: AiSdkLanguageModel, options: AiSdkModelOptions = {}): TetherModel {
  const model = languageModel as unknown as LanguageModelV3;
  const version = (model as { specificationVersion?: unknown }).specificationVersion;
  if (version !== v3.specificationVersion) {
    throw new TypeError(`aiSdkModel supports AI SDK language models of specification ${v3.specificationVersion}; ${model.provider}:${model.modelId} is ${String(version)}`);
  }
  const provider = options.provider ?? model.provider.split(".")[0];
  const modelId = options.modelId ?? model.modelId;
  const label = `${provider}:${modelId}`;
  return {
    specificationVersion: "tether-model-v1",
    provider,
    modelId,
    stream: (request, callOptions) => streamParts(model, label, options.settings ?? {}, request, callOptions),
  };
}

async function* streamParts(model: LanguageModelV3, label: string, settings: AiSdkCallSettings, request: ModelRequest, options: ModelCallOptions): AsyncGenerator<ModelStreamPart> {
  const { signal } = options;
  let stream: ReadableStream<LanguageModelV3StreamPart>;
  try {
    ({ stream } = await model.doStream({ ...(settings as Omit<LanguageModelV3CallOptions, "prompt">), prompt: v3.toPrompt(request.messages), ...v3.toTools(request.tools), abortSignal: signal }));
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    // Refused before a response stream opened (no API key; an error status: 401, 429, 5xx):
    // nothing was billed. A connection lost with no status may have been, and is not marked.
    throw modelCallError(label, error, refusedBeforeAnswer(error) ? { beforeAnswer: true } : {});
  }
  const reader = stream.getReader();
  // A provider that ignores its signal still stops: cancelling the reader cancels the response body.
  const onAbort = () => void reader.cancel(signal.reason).catch(() => undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  let finished = false;
  try {
    for (;;) {
      let next: ReadableStreamReadResult<LanguageModelV3StreamPart>;
      try {
        next = await reader.read();
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        throw modelCallError(label, error);
      }
      if (next.done) {
        finished = true;
        return;
      }
      const part = v3.fromStreamPart(next.value);
      if (part === undefined) continue;
      if (part.type === "error") throw modelCallError(label, part.error);
      yield part;
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** The provider's own message first, with the HTTP status and retry hint as details. */
export function modelCallError(label: string, error: unknown, extra: { beforeAnswer?: true } = {}): TetherError {
  if (TetherError.isInstance(error)) return error;
  if (isApiCallError(error)) {
    const status = error.statusCode;
    const retryAfter = error.responseHeaders?.["retry-after"];
    const retryAfterSeconds = retryAfter !== undefined && Number.isFinite(Number(retryAfter)) ? Number(retryAfter) : undefined;
    // A 2xx whose body broke off (connection reset mid-stream): the cause says what happened.
    const broken = status !== undefined && status < 300;
    const summary = broken ? `the response stream broke off (${causeChain(error)})` : `${status !== undefined ? `HTTP ${status}: ` : ""}${error.message}`;
    return new ModelCallError(
      `${label} failed: ${summary}`,
      {
        model: label,
        ...extra,
        ...(status !== undefined ? { statusCode: status } : {}),
        retryable: error.isRetryable,
        ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
      },
      error,
    );
  }
  return new ModelCallError(`${label} failed: ${errorText(error)}`, { model: label, ...extra }, error);
}

/** Stream error parts are often plain objects from the provider's body: `{ type?, message }`. */
function errorText(error: unknown): string {
  if (typeof error === "object" && error !== null && !(error instanceof Error)) {
    const { type, message } = error as { type?: unknown; message?: unknown };
    if (typeof message === "string") return typeof type === "string" && !message.startsWith(type) ? `${type}: ${message}` : message;
  }
  return getErrorMessage(error);
}

/** What `@ai-sdk/provider`'s `APICallError` carries; recognised by its marker, as `APICallError.isInstance` does, without loading the package. */
interface ApiCallErrorShape extends Error {
  statusCode?: number;
  responseHeaders?: Record<string, string>;
  isRetryable: boolean;
}

const apiCallErrorMarker = Symbol.for("vercel.ai.error.AI_APICallError");

const loadApiKeyErrorMarker = Symbol.for("vercel.ai.error.AI_LoadAPIKeyError");

/** No API key was found, or the provider answered with an error status: the call was refused, not cut. */
function refusedBeforeAnswer(error: unknown): boolean {
  if (error instanceof Error && (error as unknown as Record<symbol, unknown>)[loadApiKeyErrorMarker] === true) return true;
  return isApiCallError(error) && error.statusCode !== undefined && error.statusCode >= 400;
}

function isApiCallError(error: unknown): error is ApiCallErrorShape {
  return error instanceof Error && (error as unknown as Record<symbol, unknown>)[apiCallErrorMarker] === true;
}

/** `@ai-sdk/provider`'s `getErrorMessage`. */
function getErrorMessage(error: unknown): string {
  if (error == null) return "unknown error";
  if (typeof error === "string") return error;
  if (error instanceof Error) return error.message;
  return JSON.stringify(error);
}

function causeChain(error: Error): string {
  const messages: string[] = [];
  for (let cause = error.cause; cause instanceof Error && messages.length < 3; cause = cause.cause) messages.push(cause.message);
  return messages.join(": ") || error.message;
}
