import { UnknownModelError } from "../engine/errors.js";
import type { ModelResolver } from "../engine/engine-context.js";
import type { TetherModel } from "../engine/model.js";
import { SimulatedModel, type SimulatedModelOptions } from "./simulated-model.js";

/** Makes a model from the part of a model string after `provider:`. */
export type ModelFactory = (rest: string) => TetherModel;

/**
 * Resolves model strings (`simulated`, `openai:gpt-4o-mini`, …) to models. The simulated
 * model is always there, and is what a run gets when nothing is configured.
 */
export class ModelRegistry {
  private readonly factories = new Map<string, ModelFactory>();
  private readonly cache = new Map<string, TetherModel>();

  constructor(private readonly simulatedDefaults: SimulatedModelOptions = {}) {
    this.register("simulated", (rest) => new SimulatedModel({ ...this.simulatedDefaults, ...parseSimulatedOptions(rest) }));
  }

  register(provider: string, factory: ModelFactory): this {
    this.factories.set(provider, factory);
    this.cache.clear();
    return this;
  }

  providers(): string[] {
    return [...this.factories.keys()];
  }

  resolve(spec: string | TetherModel | undefined): TetherModel {
    if (spec !== undefined && typeof spec !== "string") return spec;
    const text = spec ?? "simulated";
    const cached = this.cache.get(text);
    if (cached) return cached;
    const colon = text.indexOf(":");
    const provider = colon === -1 ? text : text.slice(0, colon);
    const factory = this.factories.get(provider);
    if (!factory) throw new UnknownModelError(text, this.providers());
    const model = factory(colon === -1 ? "" : text.slice(colon + 1));
    this.cache.set(text, model);
    return model;
  }

  get resolver(): ModelResolver {
    return (spec) => this.resolve(spec);
  }
}

/** `simulated:sim-1?seed=7&tps=200` → options; unknown keys are refused. */
function parseSimulatedOptions(rest: string): SimulatedModelOptions {
  if (!rest) return {};
  const [modelId, query] = rest.split("?", 2);
  const options: SimulatedModelOptions = {};
  if (modelId) options.modelId = modelId;
  for (const [key, value] of new URLSearchParams(query ?? "")) {
    const number = Number(value);
    if (key === "seed" && Number.isInteger(number)) options.seed = number;
    else if (key === "tps" && number > 0) options.tokensPerSecond = number;
    else if (key === "rounds" && Number.isInteger(number) && number >= 0) options.rounds = number;
    else throw new UnknownModelError(`simulated:${rest}`, ["simulated (options: seed, tps, rounds)"]);
  }
  return options;
}
