import { describe, expect, it } from "vitest";
import { ModelCallError } from "./errors.js";
import { estimateTokens, streamModelCall } from "./gate.js";
import type { ModelStreamPart, TetherModel } from "./model.js";

const prompt = "x".repeat(4_000);
const request = { messages: [{ role: "user" as const, content: prompt }], tools: [] };

function failing(error: Error, before: ModelStreamPart[] = []): TetherModel {
  return {
    specificationVersion: "tether-model-v1",
    provider: "test",
    modelId: "failing",
    async *stream() {
      for (const part of before) yield part;
      throw error;
    },
  };
}

const call = (model: TetherModel) => streamModelCall(model, request, { signal: new AbortController().signal, idempotencyKey: "k", onDelta: () => undefined });

describe("what a failed model call counts", () => {
  it("nothing when the adapter says the provider refused before a response opened (no key, 401, 429, 5xx)", async () => {
    const outcome = await call(failing(new ModelCallError("test:failing failed: HTTP 401: bad key", { model: "test:failing", beforeAnswer: true, statusCode: 401 })));
    expect(outcome).toMatchObject({ type: "failed", usage: { inputTokens: 0, outputTokens: 0 } });
  });

  it("the prompt's estimate when a model fails with no such word (it may have been billed): budgets stay on the safe side", async () => {
    const outcome = await call(failing(new Error("socket hang up")));
    expect(outcome).toMatchObject({ type: "failed", usage: { inputTokens: estimateTokens(prompt.length), outputTokens: 0 } });
  });

  it("the prompt and the text so far when a stream breaks off", async () => {
    const outcome = await call(failing(new Error("reset"), [{ type: "text-delta", text: "y".repeat(400) }]));
    expect(outcome).toMatchObject({ type: "failed", usage: { inputTokens: estimateTokens(prompt.length), outputTokens: estimateTokens(400) } });
  });
});
