import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Usage } from "../../src/engine/usage.js";
import { startOpenAICompatibleServer, type OpenAICompatibleServer, type ScriptedError } from "../../src/testing/openai-compatible-server.js";
import { entriesOf, testModel, wireAgent, wireRuntime, type LookupCall, type WireRuntime } from "./wire-helpers.js";

describe("openai-compatible over a real HTTP wire: provider errors and bad tool arguments", () => {
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

  const failures: [string, ScriptedError, RegExp][] = [
    ["429 rate limit", { type: "error", status: 429, message: "Rate limit reached for requests. Please try again in 2s.", code: "rate_limit_exceeded", headers: { "retry-after": "2" } }, /failed: HTTP 429: Rate limit reached for requests/],
    ["500 server error", { type: "error", status: 500, message: "The server had an error while processing your request.", errorType: "server_error" }, /failed: HTTP 500: The server had an error/],
    ["401 bad key", { type: "error", status: 401, message: "Incorrect API key provided: sk-wrong.", code: "invalid_api_key" }, /failed: HTTP 401: Incorrect API key provided/],
  ];

  for (const [label, failure, expected] of failures) {
    it(`a ${label} fails the call with the provider's message and pauses the run; resume after the fix completes`, async () => {
      server.enqueue(failure, { text: "Recovered answer." });
      wire = wireRuntime([wireAgent("wire-errors", server.modelString(testModel), seen)]);
      const { runtime } = wire;
      const run = await runtime.start("wire-errors", "Define tether");
      const paused = await runtime.waitFor(run.id, ["paused", "failed", "completed"], { timeoutMs: 10_000 });
      expect(paused.status).toBe("paused");
      expect(paused.statusReason).toMatch(/^model_error: /);
      expect(paused.statusReason).toMatch(expected);
      const journal = await runtime.journal(run.id);
      const [failed] = entriesOf(journal, "call.failed");
      expect(failed.data).toMatchObject({ kind: "model", name: `openai-compatible:${testModel}`, error: "model_error" });
      expect(String(failed.data.message)).toMatch(expected);
      expect(entriesOf(journal, "status").map((e) => `${e.data.from}→${e.data.to}`)).toEqual(["queued→running", "running→pausing", "pausing→paused"]);
      // Refused before any answer: the provider billed nothing, and nothing is counted.
      expect(failed.data.usage as unknown as Usage).toMatchObject({ inputTokens: 0, outputTokens: 0 });
      expect(paused.usage).toMatchObject({ inputTokens: 0, outputTokens: 0 });
      expect(server.completions).toHaveLength(1);

      // The server is fixed (its next response is a good one): resume completes.
      await runtime.resume(run.id, { actor: "ops" });
      const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
      expect(done.status).toBe("completed");
      expect(done.output).toBe("Recovered answer.");
      expect(server.completions).toHaveLength(2);
    });
  }

  it("a connection dropped mid-stream fails the call and pauses the run with model_error", async () => {
    server.enqueue({ text: "This answer will be cut off before it ends, sadly.", dropAfterChunks: 4 }, { text: "Second try." });
    wire = wireRuntime([wireAgent("wire-drop", server.modelString(testModel), seen)]);
    const { runtime } = wire;
    const run = await runtime.start("wire-drop", "Define tether");
    const paused = await runtime.waitFor(run.id, ["paused", "failed", "completed"], { timeoutMs: 10_000 });
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toBe("model_error: openai-compatible:wire-model failed: the response stream broke off (terminated: other side closed)");
    // What streamed before the drop is counted.
    const [failed] = entriesOf(await runtime.journal(run.id), "call.failed");
    expect((failed.data.usage as unknown as Usage).outputTokens).toBeGreaterThan(0);
    expect(paused.usage.outputTokens).toBeGreaterThan(0);
    await runtime.resume(run.id);
    expect((await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 })).output).toBe("Second try.");
  });

  const badArguments: [string, string, RegExp][] = [
    ["arguments of the wrong type", JSON.stringify({ query: 42 }), /invalid input for tool lookup: query: Invalid input: expected string, received number/],
    ["arguments that are not JSON", '{"query": "teth', /invalid input for tool lookup: \(input\): Invalid input: expected object, received string/],
  ];

  for (const [label, args, expected] of badArguments) {
    it(`a model that sends ${label} gets the validation error back as the tool result; the run goes on`, async () => {
      server.enqueue(
        { toolCalls: [{ id: "call_bad", name: "lookup", arguments: args }] },
        { toolCalls: [{ id: "call_good", name: "lookup", arguments: JSON.stringify({ query: "tether" }) }] },
        { text: "Fixed my arguments; a tether is a rope." },
      );
      wire = wireRuntime([wireAgent("wire-bad-args", server.modelString(testModel), seen)]);
      const { runtime } = wire;
      const run = await runtime.start("wire-bad-args", "Define tether");
      const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
      expect(done.status).toBe("completed");
      const journal = await runtime.journal(run.id);
      const failed = entriesOf(journal, "call.failed");
      expect(failed).toHaveLength(1);
      expect(failed[0].data).toMatchObject({ kind: "tool", name: "lookup", error: "invalid_input" });
      expect(String(failed[0].data.message)).toMatch(expected);
      // The tool never ran with the bad input; the model saw the error as the tool's result.
      expect(seen).toEqual([{ query: "tether" }]);
      const errorResult = server.completions[1].body!.messages.find((m) => m.role === "tool" && m.tool_call_id === "call_bad");
      expect(JSON.parse(String(errorResult!.content))).toMatchObject({ error: "invalid_input", message: expect.stringMatching(expected) });
    });
  }
});
