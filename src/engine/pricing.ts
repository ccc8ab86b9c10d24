import type { Usage } from "./usage.js";

/** USD per million tokens. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
  cachedInputPerMTok?: number;
}

/** Known list prices; users extend or override it with `PriceTable.set`. */
const defaultPrices: Record<string, ModelPrice> = {
  "simulated:sim-1": { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
  "openai:gpt-4o-mini": { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
  "openai:gpt-4o": { inputPerMTok: 2.5, outputPerMTok: 10, cachedInputPerMTok: 1.25 },
  "openai:gpt-4.1": { inputPerMTok: 2, outputPerMTok: 8, cachedInputPerMTok: 0.5 },
  "openai:gpt-4.1-mini": { inputPerMTok: 0.4, outputPerMTok: 1.6, cachedInputPerMTok: 0.1 },
  "anthropic:claude-sonnet-4-5": { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3 },
  "anthropic:claude-haiku-4-5": { inputPerMTok: 1, outputPerMTok: 5, cachedInputPerMTok: 0.1 },
};

export class PriceTable {
  private readonly prices = new Map<string, ModelPrice>(Object.entries(defaultPrices));

  set(modelKey: string, price: ModelPrice): this {
    this.prices.set(modelKey, price);
    return this;
  }

  get(modelKey: string): ModelPrice | undefined {
    return this.prices.get(modelKey);
  }

  /** Cost of a call; cached input tokens are part of the input tokens, billed at the cached rate. */
  cost(modelKey: string, usage: Pick<Usage, "inputTokens" | "outputTokens" | "cachedInputTokens">): number {
    const price = this.prices.get(modelKey);
    if (!price) return 0;
    const cached = Math.min(usage.cachedInputTokens, usage.inputTokens);
    const uncached = usage.inputTokens - cached;
    const cachedRate = price.cachedInputPerMTok ?? price.inputPerMTok;
    return (uncached * price.inputPerMTok + cached * cachedRate + usage.outputTokens * price.outputPerMTok) / 1e6;
  }
}
