import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3GenerateResult,
  LanguageModelV3Message,
  LanguageModelV3Middleware,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import type { wrapLanguageModel } from "ai";
import type { DurableContext } from "../engine/function-agent.js";
import type { Json } from "../engine/json.js";
import { optionalRequire } from "../engine/optional-import.js";
import { fromAiSdkTool, type AiSdkTool, type AiSdkToolDeclarations } from "../tools/ai-sdk-tool.js";
import type { AiSdkLanguageModel } from "./ai-sdk-model.js";
import { toUsage } from "./ai-sdk-v3.js";

/**
 * The Vercel AI SDK as a drop-in inside an async-function agent. `model` wraps any AI SDK
 * language model with the SDK's own middleware (`wrapLanguageModel`): every `doStream` and
 * `doGenerate` is a gate (journaled, aborted by a pause, replayed on resume without calling the
 * provider). `tools` wraps AI SDK tools so each `execute` is a gate, with Tether's effect
 * declarations (compensate, idempotent, check, abortable, needsApproval). What people say to the
 * running run (`tether say`) reaches the model as user messages (see `SteeredPrompt`).
 */
export interface AiSdkGates {
  model<M extends AiSdkLanguageModel>(model: M): M;
  tools<T extends Record<string, AiSdkTool<any, any>>>(tools: T, declarations?: { [K in keyof T]?: AiSdkToolDeclarations<any, any> }): T;
}

type Wrap = typeof wrapLanguageModel;

export function aiSdkGates(ctx: DurableContext): AiSdkGates {
  return {
    model: (model) => durableModel(ctx, model),
    tools: (tools, declarations = {}) => {
      const wrapped: Record<string, unknown> = {};
      for (const [name, aiTool] of Object.entries(tools)) {
        // A tool without execute runs on the client: nothing of Tether's to wrap.
        if (typeof aiTool.execute !== "function") {
          wrapped[name] = aiTool;
          continue;
        }
        const tool = fromAiSdkTool(name, aiTool, declarations[name] ?? {});
        // Tether asks for approval itself (the run pauses for a person), so the SDK's own flag goes.
        wrapped[name] = { ...aiTool, needsApproval: undefined, execute: (input: Json) => ctx.tool(tool, input) };
      }
      return wrapped as typeof tools;
    },
  };
}

function durableModel<M extends AiSdkLanguageModel>(ctx: DurableContext, languageModel: M): M {
  const { wrapLanguageModel } = optionalRequire<{ wrapLanguageModel: Wrap }>("ai", "ctx.aiSdk.model (the AI SDK drop-in)");
  const model = languageModel as unknown as LanguageModelV3;
  const name = `${model.provider.split(".")[0]}:${model.modelId}`;
  const steered = new SteeredPrompt(ctx);
  const middleware: LanguageModelV3Middleware = {
    specificationVersion: "v3",
    wrapGenerate: async ({ params: asked, model: inner }) => {
      const params = await steered.apply(asked);
      const result = await ctx.modelStep(
        name,
        async ({ signal }) => encode(generated(await inner.doGenerate({ ...params, abortSignal: anySignal(params.abortSignal, signal) }))),
        // Aborted while waiting for the answer: the prompt was sent (and is counted), nothing came back.
        { input: callInput(params), usage: (r) => toUsage((decode(r) as LanguageModelV3GenerateResult).usage), partial: () => ({ text: "", inputChars: promptChars(params) }) },
      );
      return decode(result) as LanguageModelV3GenerateResult;
    },
    wrapStream: async ({ params: asked, model: inner }) => {
      const params = await steered.apply(asked);
      // The parts read so far: what an aborted stream had produced counts against the budgets.
      const received: LanguageModelV3StreamPart[] = [];
      const parts = await ctx.modelStep(
        name,
        async ({ signal }) => {
          received.length = 0;
          const { stream } = await inner.doStream({ ...params, abortSignal: anySignal(params.abortSignal, signal) });
          return encode(await readAll(stream, signal, received));
        },
        {
          input: callInput(params),
          usage: (encoded) => toUsage(finishOf(decode(encoded) as LanguageModelV3StreamPart[])?.usage),
          partial: () => ({ text: streamedText(received), inputChars: promptChars(params) }),
        },
      );
      return { stream: replay(decode(parts) as LanguageModelV3StreamPart[]) };
    },
  };
  return wrapLanguageModel({ model, middleware }) as unknown as M;
}

/**
 * Steering for the drop-in: before each model call, the messages people sent since the last one
 * (`ctx.messages()`, journaled and replayed) go into the prompt as user messages, after what the
 * SDK sent; later calls of the same conversation carry them at the same place, as the SDK's own
 * history would. A prompt shorter than the last call's is another conversation, which starts
 * without them.
 */
class SteeredPrompt {
  /** Messages put in, each at its index in the SDK's own prompt (ascending). */
  private inserted: { at: number; message: LanguageModelV3Message }[] = [];
  private lastLength = 0;

  constructor(private readonly ctx: DurableContext) {}

  async apply(params: LanguageModelV3CallOptions): Promise<LanguageModelV3CallOptions> {
    const prompt = params.prompt;
    if (prompt.length < this.lastLength) this.inserted = [];
    this.lastLength = prompt.length;
    for (const said of await this.ctx.messages()) this.inserted.push({ at: prompt.length, message: { role: "user", content: [{ type: "text", text: said.text }] } });
    if (!this.inserted.length) return params;
    const merged: LanguageModelV3Message[] = [];
    let next = 0;
    for (let i = 0; i <= prompt.length; i++) {
      while (next < this.inserted.length && this.inserted[next].at === i) merged.push(this.inserted[next++].message);
      if (i < prompt.length) merged.push(prompt[i]);
    }
    return { ...params, prompt: merged };
  }
}

/**
 * What a model call depends on, compared on replay: the prompt's length and its newest message
 * (the earlier ones came from gates already compared), and the tools offered. Not the whole
 * prompt: that would cost O(history) at every call.
 */
function callInput(params: LanguageModelV3CallOptions): Json {
  return { messages: params.prompt.length, last: encode(params.prompt[params.prompt.length - 1] ?? null), tools: (params.tools ?? []).map((t) => t.name) };
}

/** The parts of a generate result worth keeping: not the raw HTTP bodies and headers. */
function generated(result: LanguageModelV3GenerateResult): LanguageModelV3GenerateResult {
  const { request: _request, response, ...rest } = result;
  return { ...rest, ...(response ? { response: { id: response.id, timestamp: response.timestamp, modelId: response.modelId } } : {}) };
}

function finishOf(parts: LanguageModelV3StreamPart[]): (LanguageModelV3StreamPart & { type: "finish" }) | undefined {
  return parts.find((p): p is LanguageModelV3StreamPart & { type: "finish" } => p.type === "finish");
}

/** The text and reasoning a stream's parts carried (what an aborted stream had produced). */
function streamedText(parts: readonly LanguageModelV3StreamPart[]): string {
  let text = "";
  for (const part of parts) if (part.type === "text-delta" || part.type === "reasoning-delta" || part.type === "tool-input-delta") text += part.delta;
  return text;
}

/** The size of what a call sends: its prompt and the tools offered. */
function promptChars(params: LanguageModelV3CallOptions): number {
  return JSON.stringify(params.prompt).length + (params.tools ? JSON.stringify(params.tools).length : 0);
}

async function readAll(stream: ReadableStream<LanguageModelV3StreamPart>, signal: AbortSignal, parts: LanguageModelV3StreamPart[]): Promise<LanguageModelV3StreamPart[]> {
  const reader = stream.getReader();
  // A provider that ignores its signal still stops: cancelling the reader cancels the response body.
  const onAbort = () => void reader.cancel(signal.reason).catch(() => undefined);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const next = await reader.read();
      if (signal.aborted) throw signal.reason;
      if (next.done) return parts;
      if (next.value.type === "error") throw next.value.error;
      parts.push(next.value);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

function replay(parts: LanguageModelV3StreamPart[]): ReadableStream<LanguageModelV3StreamPart> {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

function anySignal(outer: AbortSignal | undefined, gate: AbortSignal): AbortSignal {
  return outer ? AbortSignal.any([outer, gate]) : gate;
}

/** JSON for the journal: dates and bytes marked so they come back as they were. */
function encode(value: unknown): Json {
  if (value === undefined || value === null) return null;
  if (value instanceof Date) return { $date: value.toISOString() };
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString("base64") };
  if (value instanceof URL) return { $url: value.href };
  if (Array.isArray(value)) return value.map(encode);
  if (typeof value === "object") {
    const out: Record<string, Json> = {};
    for (const [key, member] of Object.entries(value)) if (member !== undefined) out[key] = encode(member);
    return out;
  }
  if (typeof value === "number" && !Number.isFinite(value)) return null;
  return value as Json;
}

function decode(value: Json): unknown {
  if (Array.isArray(value)) return value.map(decode);
  if (value === null || typeof value !== "object") return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    if (typeof value.$date === "string") return new Date(value.$date);
    if (typeof value.$bytes === "string") return new Uint8Array(Buffer.from(value.$bytes, "base64"));
    if (typeof value.$url === "string") return new URL(value.$url);
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) out[key] = decode(value[key]);
  return out;
}
