export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  costUsd: number;
}

export const zeroUsage: Usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, costUsd: 0 };

export function addUsage(a: Usage, b: Partial<Usage>): Usage {
  return {
    inputTokens: a.inputTokens + (b.inputTokens ?? 0),
    outputTokens: a.outputTokens + (b.outputTokens ?? 0),
    cachedInputTokens: a.cachedInputTokens + (b.cachedInputTokens ?? 0),
    // Rounded to a nano-dollar so sums of many small costs stay readable.
    costUsd: Math.round((a.costUsd + (b.costUsd ?? 0)) * 1e9) / 1e9,
  };
}

/** Usage as a journal entry records it: cached tokens and cost only when there are any. */
export function usageEntry(usage: Usage): { inputTokens: number; outputTokens: number; cachedInputTokens?: number; costUsd?: number } {
  return {
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    ...(usage.cachedInputTokens ? { cachedInputTokens: usage.cachedInputTokens } : {}),
    ...(usage.costUsd ? { costUsd: usage.costUsd } : {}),
  };
}
