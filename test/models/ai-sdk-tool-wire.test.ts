import { tool as aiTool } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { startOpenAICompatibleServer, type OpenAICompatibleServer } from "../../src/testing/openai-compatible-server.js";
import { fromAiSdkTool } from "../../src/tools/ai-sdk-tool.js";
import { entriesOf, testModel, wireRuntime, type WireRuntime } from "./wire-helpers.js";

describe("an AI SDK tool in a Tether run, with a real provider client on the wire", () => {
  let server: OpenAICompatibleServer;
  let wire: WireRuntime;

  beforeEach(async () => {
    server = await startOpenAICompatibleServer();
  });

  afterEach(async () => {
    await wire?.close();
    await server.close();
  });

  it("bad arguments from the model come back to it as invalid_input; the corrected call runs", async () => {
    const calls: { city: string; days: number }[] = [];
    const forecast = aiTool({
      description: "Forecast for a city",
      inputSchema: z.object({ city: z.string(), days: z.number().int().min(1).max(7) }),
      execute: async (input) => {
        calls.push(input);
        return { city: input.city, outlook: "rain" };
      },
    });
    server.enqueue(
      { toolCalls: [{ id: "call_1", name: "forecast", arguments: JSON.stringify({ city: "Oslo", days: 30 }) }] },
      { toolCalls: [{ id: "call_2", name: "forecast", arguments: JSON.stringify({ city: "Oslo", days: 3 }) }] },
      { text: "Rain in Oslo." },
    );
    const agent = toolLoopAgent({ name: "forecaster", model: server.modelString(testModel), tools: [fromAiSdkTool("forecast", forecast)] });
    wire = wireRuntime([agent]);
    const { runtime } = wire;
    const run = await runtime.start("forecaster", "Weather in Oslo?");
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    expect(done.output).toBe("Rain in Oslo.");
    expect(calls).toEqual([{ city: "Oslo", days: 3 }]);
    const [failed] = entriesOf(await runtime.journal(run.id), "call.failed");
    expect(failed.data).toMatchObject({ kind: "tool", name: "forecast", error: "invalid_input", message: "invalid input for tool forecast: days: Too big: expected number to be <=7" });
    // The provider saw the tool's schema, and then the validation error as the tool result.
    expect(server.completions[0].body!.tools![0].function).toMatchObject({ name: "forecast", description: "Forecast for a city", parameters: { properties: { days: { maximum: 7 } } } });
    const toolResult = server.completions[1].body!.messages.find((m) => m.role === "tool");
    expect(JSON.parse(String(toolResult!.content))).toEqual({ error: "invalid_input", message: "invalid input for tool forecast: days: Too big: expected number to be <=7" });
  });
});
