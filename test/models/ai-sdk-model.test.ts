import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { TetherError } from "../../src/engine/errors.js";
import { streamModelCall } from "../../src/engine/gate.js";
import type { ModelRequest } from "../../src/engine/model.js";
import { aiSdkModel } from "../../src/models/ai-sdk-model.js";
import { createModelRegistry, parseOpenAICompatible } from "../../src/models/providers.js";

const usage = (input: number, output: number, cacheRead?: number) => ({
  inputTokens: { total: input, noCache: input - (cacheRead ?? 0), cacheRead, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

/** A provider-spec v3 model that streams `parts` and records the options of each call. */
function fakeModel(parts: LanguageModelV3StreamPart[] | (() => never), calls: LanguageModelV3CallOptions[] = []): LanguageModelV3 {
  return {
    specificationVersion: "v3",
    provider: "fake.chat",
    modelId: "fake-1",
    supportedUrls: {},
    doGenerate: () => Promise.reject(new Error("not used")),
    doStream: async (options) => {
      calls.push(options);
      if (typeof parts === "function") parts();
      return {
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(controller) {
            for (const part of parts as LanguageModelV3StreamPart[]) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  };
}

const request: ModelRequest = {
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Look up two words." },
    { role: "assistant", content: "", toolCalls: [{ toolCallId: "c1", toolName: "lookup", input: { query: "a" } }, { toolCallId: "c2", toolName: "lookup", input: { query: "b" } }] },
    { role: "tool", toolCallId: "c1", toolName: "lookup", content: { definition: "a: a letter" } },
    { role: "tool", toolCallId: "c2", toolName: "lookup", content: "b is not found", isError: true },
    { role: "user", content: "Thanks", author: "alice" },
  ],
  tools: [{ name: "lookup", description: "Look a word up", inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } }],
};

describe("aiSdkModel: AI SDK LanguageModel (spec v3) → Tether model", () => {
  it("names the provider and model for the journal and the price table", () => {
    const model = aiSdkModel(fakeModel([]));
    expect([model.provider, model.modelId]).toEqual(["fake", "fake-1"]);
    expect(aiSdkModel(fakeModel([]), { provider: "mine", modelId: "m" })).toMatchObject({ provider: "mine", modelId: "m" });
  });

  it("refuses a model of another specification version, naming it", () => {
    const v2 = { ...fakeModel([]), specificationVersion: "v2" } as unknown as LanguageModelV3;
    expect(() => aiSdkModel(v2)).toThrow(/specification v3; fake.chat:fake-1 is v2/);
  });

  it("converts messages, tool calls, tool results (errors too) and tool specs to the provider prompt", async () => {
    const calls: LanguageModelV3CallOptions[] = [];
    const model = aiSdkModel(fakeModel([{ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage(10, 1) }], calls), { settings: { temperature: 0 } });
    const signal = new AbortController().signal;
    await streamModelCall(model, request, { signal, idempotencyKey: "k", onDelta: () => undefined });
    const [options] = calls;
    expect(options.abortSignal).toBe(signal);
    expect(options.temperature).toBe(0);
    expect(options.prompt).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "Look up two words." }] },
      {
        role: "assistant",
        content: [
          { type: "tool-call", toolCallId: "c1", toolName: "lookup", input: { query: "a" } },
          { type: "tool-call", toolCallId: "c2", toolName: "lookup", input: { query: "b" } },
        ],
      },
      {
        role: "tool",
        content: [
          { type: "tool-result", toolCallId: "c1", toolName: "lookup", output: { type: "json", value: { definition: "a: a letter" } } },
          { type: "tool-result", toolCallId: "c2", toolName: "lookup", output: { type: "error-text", value: "b is not found" } },
        ],
      },
      { role: "user", content: [{ type: "text", text: "Thanks" }] },
    ]);
    expect(options.tools).toEqual([{ type: "function", name: "lookup", description: "Look a word up", inputSchema: request.tools[0].inputSchema }]);
    expect(options.toolChoice).toEqual({ type: "auto" });
  });

  it("maps text deltas, complete tool calls, finish and usage with cached input tokens", async () => {
    const model = aiSdkModel(
      fakeModel([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Looking " },
        { type: "reasoning-delta", id: "r", delta: "(thinking)" },
        { type: "text-delta", id: "t", delta: "it up." },
        { type: "text-end", id: "t" },
        { type: "tool-input-start", id: "c9", toolName: "lookup" },
        { type: "tool-input-delta", id: "c9", delta: '{"query":' },
        { type: "tool-input-delta", id: "c9", delta: '"x"}' },
        { type: "tool-input-end", id: "c9" },
        { type: "tool-call", toolCallId: "c9", toolName: "lookup", input: '{"query":"x"}' },
        { type: "tool-call", toolCallId: "c10", toolName: "web_search", input: "{}", providerExecuted: true },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage: usage(1200, 30, 1000) },
      ]),
    );
    const deltas: string[] = [];
    const outcome = await streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: (t) => deltas.push(t) });
    expect(deltas).toEqual(["Looking ", "it up."]);
    expect(outcome).toEqual({
      type: "completed",
      result: { text: "Looking it up.", toolCalls: [{ toolCallId: "c9", toolName: "lookup", input: { query: "x" } }], finishReason: "tool-calls", usage: { inputTokens: 1200, outputTokens: 30, cachedInputTokens: 1000 } },
    });
  });

  it("keeps tool-call input that is not JSON as text, for the tool's validation to report", async () => {
    const model = aiSdkModel(fakeModel([{ type: "tool-call", toolCallId: "c", toolName: "lookup", input: '{"query": "te' }, { type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage: usage(5, 5) }]));
    const outcome = await streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });
    expect(outcome.type === "completed" && outcome.result.toolCalls).toEqual([{ toolCallId: "c", toolName: "lookup", input: '{"query": "te' }]);
  });

  it("leaves usage to the gate's estimate when the provider reports none", async () => {
    const model = aiSdkModel(fakeModel([{ type: "text-delta", id: "t", delta: "12345678" }, { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage: { inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: undefined, text: undefined, reasoning: undefined } } }]));
    const outcome = await streamModelCall(model, { messages: [{ role: "user", content: "x".repeat(40) }], tools: [] }, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });
    expect(outcome.type === "completed" && outcome.result.usage).toEqual({ inputTokens: 10, outputTokens: 2, cachedInputTokens: 0 });
  });

  it("an error part in the stream fails the call with model_error and the provider's message", async () => {
    const model = aiSdkModel(fakeModel([{ type: "text-delta", id: "t", delta: "par" }, { type: "error", error: { message: "overloaded_error: Overloaded" } }]));
    const outcome = await streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });
    expect(outcome.type).toBe("failed");
    if (outcome.type !== "failed") return;
    expect(outcome.error.code).toBe("model_error");
    expect(outcome.error.message).toBe("fake:fake-1 failed: overloaded_error: Overloaded");
    expect(outcome.usage.outputTokens).toBe(1);
  });

  it("an abort mid-stream stops reading and reports what streamed, even if the provider ignores the signal", async () => {
    let pulls = 0;
    const stubborn: LanguageModelV3 = {
      ...fakeModel([]),
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          async pull(controller) {
            pulls += 1;
            await new Promise((r) => setTimeout(r, 5));
            controller.enqueue({ type: "text-delta", id: "t", delta: "tick " });
          },
        }),
      }),
    };
    const controller = new AbortController();
    const seen: string[] = [];
    const outcome = await streamModelCall(aiSdkModel(stubborn), request, {
      signal: controller.signal,
      idempotencyKey: "k",
      onDelta: (t) => {
        seen.push(t);
        if (seen.length === 3) controller.abort("pause");
      },
    });
    expect(outcome).toMatchObject({ type: "aborted", text: "tick tick tick ", estimated: true });
    const pullsAtAbort = pulls;
    await new Promise((r) => setTimeout(r, 30));
    expect(pulls).toBeLessThanOrEqual(pullsAtAbort + 1);
  });
});

describe("createModelRegistry: provider strings", () => {
  it("lists the providers of an unknown model string", () => {
    const registry = createModelRegistry();
    expect(registry.providers()).toEqual(["simulated", "openai", "anthropic", "openai-compatible"]);
    try {
      registry.resolve("gemini:flash");
      expect.unreachable();
    } catch (error) {
      expect(TetherError.isInstance(error) && error.code).toBe("unknown_model");
      expect((error as Error).message).toBe('unknown model "gemini:flash"; providers: simulated, openai, anthropic, openai-compatible');
    }
  });

  it("resolves openai, anthropic and openai-compatible strings to AI SDK models named for their price keys", () => {
    const registry = createModelRegistry({ env: {} });
    expect(registry.resolve("openai:gpt-4o-mini")).toMatchObject({ provider: "openai", modelId: "gpt-4o-mini" });
    expect(registry.resolve("anthropic:claude-sonnet-4-5")).toMatchObject({ provider: "anthropic", modelId: "claude-sonnet-4-5" });
    expect(registry.resolve("openai-compatible:http://localhost:11434/v1#llama3.2")).toMatchObject({ provider: "openai-compatible", modelId: "llama3.2" });
  });

  it("parses openai-compatible strings and refuses malformed ones with the expected form", () => {
    expect(parseOpenAICompatible("http://127.0.0.1:8000/v1/#Qwen/Qwen3-8B")).toEqual({ baseURL: "http://127.0.0.1:8000/v1", modelId: "Qwen/Qwen3-8B" });
    for (const bad of ["openai-compatible:llama3.2", "openai-compatible:http://localhost:11434/v1", "openai-compatible:ftp://x#m", "openai:", "anthropic:"]) {
      expect(() => createModelRegistry().resolve(bad)).toThrow(/unknown model .*(openai-compatible:<baseURL>#<model>|<model>)/);
    }
  });

  for (const [spec, env, errorBody, expected] of [
    ["openai:gpt-4o-mini", { OPENAI_API_KEY: "sk-test" }, { error: { message: "Incorrect API key provided: sk-test.", type: "invalid_request_error", code: "invalid_api_key", param: null } }, "openai:gpt-4o-mini failed: HTTP 401: Incorrect API key provided: sk-test."],
    ["anthropic:claude-haiku-4-5", { ANTHROPIC_API_KEY: "sk-ant-test" }, { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }, "anthropic:claude-haiku-4-5 failed: HTTP 401: invalid x-api-key"],
  ] as const) {
    it(`${spec}: the real provider client's HTTP error becomes model_error with the provider's message`, async () => {
      const urls: string[] = [];
      const fetch = (async (url: string | URL | Request) => {
        urls.push(String(url));
        return new Response(JSON.stringify(errorBody), { status: 401, headers: { "content-type": "application/json" } });
      }) as typeof globalThis.fetch;
      const model = createModelRegistry({ env, fetch }).resolve(spec);
      const outcome = await streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });
      expect(outcome.type === "failed" && outcome.error.toJSON()).toMatchObject({ code: "model_error", message: expected, details: { statusCode: 401, retryable: false } });
      expect(urls).toHaveLength(1);
    });
  }

  it("a missing API key fails the call (the run pauses) with the provider's instructions, not at resolve time", async () => {
    const model = createModelRegistry({ env: { OPENAI_API_KEY: undefined } }).resolve("openai:gpt-4o-mini");
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      const outcome = await streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });
      expect(outcome.type === "failed" && outcome.error.message).toMatch(/^openai:gpt-4o-mini failed: OpenAI API key is missing/);
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    }
  });
});
