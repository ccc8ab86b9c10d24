import type { createAnthropic } from "@ai-sdk/anthropic";
import type { createOpenAI } from "@ai-sdk/openai";
import type { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { UnknownModelError } from "../engine/errors.js";
import type { TetherModel } from "../engine/model.js";
import { optionalImport, requireInstalled } from "../engine/optional-import.js";
import { aiSdkModel, type AiSdkLanguageModel } from "./ai-sdk-model.js";
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
 *
 * The provider packages are optional peers: each is loaded when a model of its provider is
 * first called, and a model string whose package is not installed is refused with
 * `missing_dependency` and the `npm install` that adds it.
 */
export function createModelRegistry(options: ModelRegistryOptions = {}): ModelRegistry {
  const env = options.env;
  const fetch = options.fetch;
  const registry = new ModelRegistry(options.simulated);
  registry.register("openai", (modelId) => {
    if (!modelId) throw new UnknownModelError("openai:", ["openai:<model>, e.g. openai:gpt-4o-mini"]);
    return lazyProviderModel("@ai-sdk/openai", "openai", modelId, async () => {
      const { createOpenAI: create } = await optionalImport<{ createOpenAI: typeof createOpenAI }>("@ai-sdk/openai", `the model "openai:${modelId}"`);
      return create({ ...(env ? { apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL } : {}), ...(fetch ? { fetch } : {}) })(modelId);
    });
  });
  registry.register("anthropic", (modelId) => {
    if (!modelId) throw new UnknownModelError("anthropic:", ["anthropic:<model>, e.g. anthropic:claude-sonnet-4-5"]);
    return lazyProviderModel("@ai-sdk/anthropic", "anthropic", modelId, async () => {
      const { createAnthropic: create } = await optionalImport<{ createAnthropic: typeof createAnthropic }>("@ai-sdk/anthropic", `the model "anthropic:${modelId}"`);
      return create({ ...(env ? { apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL } : {}), ...(fetch ? { fetch } : {}) })(modelId);
    });
  });
  registry.register("openai-compatible", (rest) => {
    const { baseURL, modelId } = parseOpenAICompatible(rest);
    const apiKey = (env ?? process.env).OPENAI_COMPATIBLE_API_KEY;
    return lazyProviderModel("@ai-sdk/openai-compatible", "openai-compatible", modelId, async () => {
      const { createOpenAICompatible: create } = await optionalImport<{ createOpenAICompatible: typeof createOpenAICompatible }>("@ai-sdk/openai-compatible", `the model "openai-compatible:${rest}"`);
      return create({ name: "openai-compatible", baseURL, includeUsage: true, ...(apiKey ? { apiKey } : {}), ...(fetch ? { fetch } : {}) }).chatModel(modelId);
    });
  });
  return registry;
}

/**
 * A model whose provider package is imported on its first call. Resolving the model string
 * already checks that the package is installed, so a run is refused at start rather than
 * paused at its first model call.
 */
function lazyProviderModel(packageName: string, provider: string, modelId: string, load: () => Promise<AiSdkLanguageModel>): TetherModel {
  requireInstalled(packageName, `the model "${provider}:${modelId}"`);
  let model: Promise<TetherModel> | undefined;
  return {
    specificationVersion: "tether-model-v1",
    provider,
    modelId,
    async *stream(request, options) {
      model ??= load().then((languageModel) => aiSdkModel(languageModel, { provider }));
      // A failed load is not cached: installing the package fixes the next call.
      const loaded = await model.catch((error: unknown) => {
        model = undefined;
        throw error;
      });
      yield* loaded.stream(request, options);
    },
  };
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
