import { performance } from "node:perf_hooks";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { addUsage, zeroUsage, type Usage } from "../../src/engine/usage.js";
import { startOpenAICompatibleServer, type OpenAICompatibleServer } from "../../src/testing/openai-compatible-server.js";
import { entriesOf, testModel, testPrice, wireAgent, wireRuntime, type LookupCall, type WireRuntime } from "./wire-helpers.js";

/**
 * The real `@ai-sdk/openai-compatible` client, through a Tether runtime, against a loopback
 * server speaking the OpenAI streaming format: what the server sees is what a provider sees.
 */
describe("openai-compatible over a real HTTP wire: pause, resume, tool calls, usage", () => {
  let server: OpenAICompatibleServer;
  let wire: WireRuntime;
  const seen: LookupCall[] = [];

  beforeEach(async () => {
    seen.length = 0;
    server = await startOpenAICompatibleServer();
  });

  afterEach(async () => {
    await wire?.close();
    await server.close();
  });

  it("a pause closes the provider's HTTP response at once, counts what was streamed, and resume issues a new request that completes", async () => {
    const longAnswer = Array.from({ length: 400 }, (_, i) => `word${i} `).join("");
    server.enqueue(
      { text: longAnswer, chunkDelayMs: 10 },
      { text: "Let me look that up.", toolCalls: [{ id: "call_lookup_1", name: "lookup", arguments: JSON.stringify({ query: "tether" }) }], argumentChunkChars: 5 },
      { text: "A tether is a rope.", usage: { promptTokens: 120, completionTokens: 9, cachedTokens: 100 } },
    );
    wire = wireRuntime([wireAgent("wire", server.modelString(testModel), seen)]);
    const { runtime } = wire;
    const run = await runtime.start("wire", "What is a tether?");

    const first = await server.nthCompletion(0);
    await server.waitUntil(() => first.chunksSent >= 10);
    const pausedAt = performance.now();
    await runtime.pause(run.id, { actor: "alice" });
    const commandReturnedAt = performance.now();
    await server.waitUntil(() => first.closedEarlyAt !== undefined, 5_000);
    const latencyMs = first.closedEarlyAt! - pausedAt;
    console.log(
      `pause → server saw the connection close: ${latencyMs.toFixed(1)} ms (pause() returned after ${(commandReturnedAt - pausedAt).toFixed(1)} ms; ${first.chunksSent} chunks had been sent)`,
    );
    // Causality, not a latency (that is the benchmark's): the close came before the answer ended.
    expect(first.endedAt).toBeUndefined();

    const paused = await runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    const journal = await runtime.journal(run.id);
    const aborted = entriesOf(journal, "call.aborted");
    expect(aborted).toHaveLength(1);
    const abortedUsage = aborted[0].data.usage as unknown as Usage;
    expect(aborted[0].data).toMatchObject({ kind: "model", name: `openai-compatible:${testModel}`, reason: "pause", estimated: true });
    expect(abortedUsage.outputTokens).toBeGreaterThan(0);
    expect(abortedUsage.inputTokens).toBeGreaterThan(0);
    expect(abortedUsage.costUsd).toBeGreaterThan(0);
    expect(paused.usage).toEqual(addUsage(zeroUsage, abortedUsage));
    // No chunk arrives after the close, so the server stopped well short of the answer.
    const chunksAtClose = first.chunksSent;
    await new Promise((r) => setTimeout(r, 50));
    expect(first.chunksSent).toBe(chunksAtClose);
    expect(first.chunksSent).toBeLessThan(400);

    await runtime.resume(run.id, { actor: "alice" });
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    expect(done.output).toBe("A tether is a rope.");

    // Resume re-issued the aborted call as a new HTTP request, from the snapshot (no partial text).
    const completions = server.completions;
    expect(completions).toHaveLength(3);
    expect(completions[1].body!.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(completions[1].body!.stream).toBe(true);
    expect(completions[1].body!.stream_options).toEqual({ include_usage: true });
    expect(completions[1].body!.tools!.map((t) => t.function.name)).toEqual(["lookup"]);

    // The streamed tool-call fragments became one tool call, which ran, and its result went back.
    expect(seen).toEqual([{ query: "tether" }]);
    const toolMessage = completions[2].body!.messages.find((m) => m.role === "tool");
    expect(toolMessage).toMatchObject({ tool_call_id: "call_lookup_1" });
    expect(JSON.parse(String(toolMessage!.content))).toEqual({ definition: "tether: a word" });
    const assistant = completions[2].body!.messages.find((m) => m.role === "assistant");
    expect(assistant!.tool_calls).toEqual([{ id: "call_lookup_1", type: "function", function: { name: "lookup", arguments: JSON.stringify({ query: "tether" }) } }]);

    // Usage: the reported final usage chunk (with cached tokens) is billed at the registered price.
    const final = await runtime.journal(run.id);
    const modelCalls = final.filter((e) => (e.type === "call.completed" || e.type === "call.aborted") && e.data.kind === "model");
    expect(modelCalls).toHaveLength(3);
    const last = modelCalls[2].data.usage as unknown as Usage;
    expect(last).toEqual({ inputTokens: 120, outputTokens: 9, cachedInputTokens: 100, costUsd: (20 * testPrice.inputPerMTok + 100 * testPrice.cachedInputPerMTok + 9 * testPrice.outputPerMTok) / 1e6 });
    const total = modelCalls.reduce((sum, e) => addUsage(sum, e.data.usage as unknown as Usage), zeroUsage);
    expect(done.usage).toEqual(total);
    expect(done.usage.cachedInputTokens).toBe(100);
  });

  it("pause → close latency over ten pause/resume cycles of one run", async () => {
    const slow = { text: Array.from({ length: 500 }, (_, i) => `t${i} `).join(""), chunkDelayMs: 10 };
    server.respondWith(() => slow);
    wire = wireRuntime([wireAgent("wire-cycles", server.modelString(testModel), seen)]);
    const { runtime } = wire;
    const run = await runtime.start("wire-cycles", "Talk for a long time");
    const latencies: number[] = [];
    const requests: Awaited<ReturnType<typeof server.nthCompletion>>[] = [];
    for (let cycle = 0; cycle < 10; cycle++) {
      const request = await server.nthCompletion(cycle);
      requests.push(request);
      await server.waitUntil(() => request.chunksSent >= 5);
      const pausedAt = performance.now();
      await runtime.pause(run.id);
      await server.waitUntil(() => request.closedEarlyAt !== undefined, 5_000);
      latencies.push(request.closedEarlyAt! - pausedAt);
      await runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
      await runtime.resume(run.id);
    }
    // The eleventh request is in flight; a cancel aborts it like a pause would.
    const eleventh = await server.nthCompletion(10);
    await runtime.cancel(run.id);
    await runtime.waitFor(run.id, ["cancelled"], { timeoutMs: 5_000 });
    await server.waitUntil(() => eleventh.closedEarlyAt !== undefined, 5_000);
    const sorted = [...latencies].sort((a, b) => a - b);
    console.log(`pause → server saw the close, 10 cycles (ms): min ${sorted[0].toFixed(1)}, median ${sorted[5].toFixed(1)}, max ${sorted[9].toFixed(1)}; all: ${latencies.map((l) => l.toFixed(1)).join(", ")}`);
    // Every pause closed its request before the answer was streamed to its end.
    expect(requests.map((r) => r.endedAt)).toEqual(Array.from({ length: 10 }, () => undefined));
    const journal = await runtime.journal(run.id);
    expect(entriesOf(journal, "call.aborted").length).toBe(11);
    expect(entriesOf(journal, "call.completed")).toEqual([]);
  });

  it("a pause before the first token closes the request too, and nothing is billed as output", async () => {
    server.enqueue({ text: "late answer", chunkDelayMs: 2_000 }, { text: "Done." });
    wire = wireRuntime([wireAgent("wire-early", server.modelString(testModel), seen)]);
    const { runtime } = wire;
    const run = await runtime.start("wire-early", "Quick question");
    const first = await server.nthCompletion(0);
    await server.waitUntil(() => first.chunksSent >= 1);
    const pausedAt = performance.now();
    await runtime.pause(run.id);
    await server.waitUntil(() => first.closedEarlyAt !== undefined, 5_000);
    const latencyMs = first.closedEarlyAt! - pausedAt;
    console.log(`pause before the first token → server saw the close: ${latencyMs.toFixed(1)} ms`);
    expect(first.endedAt).toBeUndefined();
    const paused = await runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    const [aborted] = entriesOf(await runtime.journal(run.id), "call.aborted");
    expect(aborted.data).toMatchObject({ streamedChars: 0, estimated: true });
    expect((aborted.data.usage as unknown as Usage).outputTokens).toBe(0);
    // The prompt was sent, so its input tokens are counted (estimated).
    expect(paused.usage.inputTokens).toBeGreaterThan(0);
    await runtime.resume(run.id);
    expect((await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 })).status).toBe("completed");
  });
});
