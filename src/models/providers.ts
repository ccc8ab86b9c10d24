import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { UnknownModelError } from "../engine/errors.js";
import { aiSdkModel } from "./ai-sdk-model.js";
import { ModelRegistry } from "./model-registry.js";
import type { SimulatedModelOptions } from "./simulated-model.js";

export interface ModelRegistryOptions {
  simulated?: SimulatedModelOptions;
  /**
   * Where API keys come from. By default each provider reads `process.env` when a call is
   * made (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `OPENAI_COMPATIBLE_API_KEY`), so a missing
   * key pauses the run with `model_error` and the provider's message instead of failing here.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** A fetch for every provider (a proxy, a recorder in tests). */
  fetch?: typeof globalThis.fetch;
}

const openAICompatibleForm = "openai-compatible:<baseURL>#<model>, e.g. openai-compatible:http://localhost:11434/v1#llama3.2";

/**
 * A registry with the simulated model and the AI SDK providers:
 * - `openai:<model>` (`@ai-sdk/openai`, the Responses API; `OPENAI_API_KEY`, `OPENAI_BASE_URL`)
 * - `anthropic:<model>` (`@ai-sdk/anthropic`; `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`)
 * - `openai-compatible:<baseURL>#<model>` (`@ai-sdk/openai-compatible`, chat completions with
 *   streamed usage: Ollama, vLLM, llama.cpp, LM Studio; optional `OPENAI_COMPATIBLE_API_KEY`).
 *
 * Prices are looked up as `provider:model`: `openai:gpt-4o`, `anthropic:claude-sonnet-4-5`,
 * and `openai-compatible:<model>` (without the base URL); register one with `PriceTable.set`.
 */
export function createModelRegistry(options: ModelRegistryOptions = {}): ModelRegistry {
  const env = options.env;
  const fetch = options.fetch;
  const registry = new ModelRegistry(options.simulated);
  registry.register("openai", (modelId) => {
    if (!modelId) throw new UnknownModelError("openai:", ["openai:<model>, e.g. openai:gpt-4o-mini"]);
    const provider = createOpenAI({ ...(env ? { apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL } : {}), ...(fetch ? { fetch } : {}) });
    return aiSdkModel(provider(modelId), { provider: "openai" });
  });
  registry.register("anthropic", (modelId) => {
    if (!modelId) throw new UnknownModelError("anthropic:", ["anthropic:<model>, e.g. anthropic:claude-sonnet-4-5"]);
    const provider = createAnthropic({ ...(env ? { apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL } : {}), ...(fetch ? { fetch } : {}) });
    return aiSdkModel(provider(modelId), { provider: "anthropic" });
  });
  registry.register("openai-compatible", (rest) => {
    const { baseURL, modelId } = parseOpenAICompatible(rest);
    const apiKey = (env ?? process.env).OPENAI_COMPATIBLE_API_KEY;
    const provider = createOpenAICompatible({ name: "openai-compatible", baseURL, includeUsage: true, ...(apiKey ? { apiKey } : {}), ...(fetch ? { fetch } : {}) });
    return aiSdkModel(provider.chatModel(modelId), { provider: "openai-compatible" });
  });
  return registry;
}

/** `http://host:port/v1#model` → its parts; anything else is refused with the expected form. */
export function parseOpenAICompatible(rest: string): { baseURL: string; modelId: string } {
  const hash = rest.lastIndexOf("#");
  const baseURL = hash === -1 ? "" : rest.slice(0, hash);
  const modelId = hash === -1 ? "" : rest.slice(hash + 1);
  let url: URL | undefined;
  try {
    url = new URL(baseURL);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || !modelId) {
    throw new UnknownModelError(`openai-compatible:${rest}`, [openAICompatibleForm]);
  }
  return { baseURL: baseURL.replace(/\/+$/, ""), modelId };
}
