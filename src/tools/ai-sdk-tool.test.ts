import { jsonSchema, tool as aiTool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { executeTool, ToolAbortedError } from "../engine/gate.js";
import type { ToolContext } from "../engine/tool.js";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";
import { fromAiSdkTool } from "./ai-sdk-tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

function context(signal = new AbortController().signal): ToolContext {
  return { runId: "run_1", idempotencyKey: "run_1:3", signal, fencingToken: 1, progress: () => undefined, resource: () => undefined as never };
}

describe("fromAiSdkTool", () => {
  it("keeps a zod input schema, its description, and passes the call's signal and key to execute", async () => {
    const seen: { input: unknown; toolCallId: string; signal: AbortSignal | undefined }[] = [];
    const weather = aiTool({
      description: "Get the weather",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }, { toolCallId, abortSignal }) => {
        seen.push({ input: { city }, toolCallId, signal: abortSignal });
        return { city, celsius: 21 };
      },
    });
    const wrapped = fromAiSdkTool("weather", weather, { idempotent: true });
    expect(wrapped).toMatchObject({ name: "weather", description: "Get the weather", idempotent: true, kind: "tether-tool" });
    expect(wrapped.spec.inputSchema).toMatchObject({ type: "object", properties: { city: { type: "string" } }, required: ["city"] });
    const ctx = context();
    expect(await executeTool(wrapped, { city: "Oslo" }, ctx)).toEqual({ type: "tool", ok: true, output: { city: "Oslo", celsius: 21 } });
    expect(seen).toEqual([{ input: { city: "Oslo" }, toolCallId: "run_1:3", signal: ctx.signal }]);
    expect(await executeTool(wrapped, { city: 3 }, ctx)).toMatchObject({ ok: false, error: "invalid_input", message: "invalid input for tool weather: city: Invalid input: expected string, received number" });
  });

  it("validates a jsonSchema() tool through its JSON Schema, and shows models that schema", async () => {
    const schema = { type: "object", properties: { n: { type: "integer", minimum: 1 } }, required: ["n"], additionalProperties: false } as const;
    const square = aiTool({ description: "Square a number", inputSchema: jsonSchema<{ n: number }>(schema), execute: async ({ n }) => n * n });
    const wrapped = fromAiSdkTool("square", square);
    expect(wrapped.spec.inputSchema).toEqual(schema);
    expect(await executeTool(wrapped, { n: 4 }, context())).toEqual({ type: "tool", ok: true, output: 16 });
    expect(await executeTool(wrapped, { n: 0 }, context())).toMatchObject({ ok: false, error: "invalid_input" });
    expect(await executeTool(wrapped, "not an object", context())).toMatchObject({ ok: false, error: "invalid_input" });
  });

  it("a streaming execute yields its last value; an output schema is checked", async () => {
    const countdown = aiTool({
      inputSchema: z.object({ from: z.number() }),
      async *execute({ from }) {
        for (let i = from; i >= 0; i--) yield { left: i };
      },
    });
    expect(await executeTool(fromAiSdkTool("countdown", countdown), { from: 3 }, context())).toEqual({ type: "tool", ok: true, output: { left: 0 } });
    const strict = fromAiSdkTool("countdown", countdown, { output: z.object({ left: z.number().min(1) }) });
    expect(await executeTool(strict, { from: 3 }, context())).toMatchObject({ ok: false, error: "tool_error" });
  });

  it("an abortable tool that honours abortSignal stops when its call's signal aborts", async () => {
    const slow = aiTool({
      inputSchema: z.object({}),
      execute: (_input, { abortSignal }) =>
        new Promise((resolve, reject) => {
          const timer = setTimeout(() => resolve("finished"), 5_000);
          abortSignal?.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(new Error("stopped"));
          });
        }),
    });
    const wrapped = fromAiSdkTool("slow", slow, { abortable: true });
    const controller = new AbortController();
    const running = executeTool(wrapped, {}, context(controller.signal));
    controller.abort("pause");
    await expect(running).rejects.toBeInstanceOf(ToolAbortedError);
  });

  it("in a run, a pause aborts the tool through abortSignal; resume calls it again and the run completes", async () => {
    const seen: string[] = [];
    const slow = aiTool({
      description: "A slow lookup",
      inputSchema: z.object({ q: z.string() }),
      execute: ({ q }, { abortSignal }) =>
        new Promise((resolve, reject) => {
          seen.push(`start ${q}`);
          if (seen.length > 1) return resolve(`found ${q}`);
          abortSignal?.addEventListener("abort", () => {
            seen.push(`aborted ${q}`);
            reject(new Error("stopped"));
          });
        }),
    });
    const agent = toolLoopAgent({
      name: "lookup",
      tools: [fromAiSdkTool("slow", slow, { abortable: true })],
      model: new SimulatedModel({
        tokensPerSecond: Number.POSITIVE_INFINITY,
        script: ({ turn }) => (turn === 0 ? { text: "Looking it up.", toolCalls: [{ toolName: "slow", input: { q: "tether" } }] } : { text: "Done." }),
      }),
    });
    h = harness([agent]);
    const run = await h.runtime.start("lookup", "find tether");
    await waitUntil(async () => seen.length === 1, { what: "the tool to start" });
    await h.runtime.pause(run.id, { actor: "alice" });
    const paused = await h.runtime.waitFor(run.id, ["paused"]);
    expect(paused.status).toBe("paused");
    expect(seen).toEqual(["start tether", "aborted tether"]);
    const journal = await h.runtime.journal(run.id, { limit: 1000 });
    const started = journal.find((e) => e.type === "call.started" && e.data.name === "slow");
    const aborted = journal.find((e) => e.type === "call.aborted");
    expect(started).toBeDefined();
    expect(aborted?.callSeq).toBe(started?.callSeq);
    expect(journal.some((e) => e.type === "call.completed" && e.data.name === "slow")).toBe(false);
    await h.runtime.resume(run.id, { actor: "alice" });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(seen).toEqual(["start tether", "aborted tether", "start tether"]);
  });

  it("refuses a tool without execute", () => {
    expect(() => fromAiSdkTool("client-side", aiTool({ inputSchema: z.object({}), outputSchema: z.string() }))).toThrow(/has no execute function/);
  });
});
