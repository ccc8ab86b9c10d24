import type { Usage } from "./usage.js";

export interface Budgets {
  maxTokens?: number;
  maxCostUsd?: number;
  maxSteps?: number;
  maxWallTimeMs?: number;
  /** The same tool with the same arguments this many times in a row trips the loop detector. */
  maxRepeatedToolCalls?: number;
  /** This many failed tool calls in a row (any tools, any arguments) pause the run with `repeated_failures`. */
  maxConsecutiveFailures?: number;
}

/** The defaults every run gets unless its agent or its start says otherwise. */
export const defaultBudgets: Budgets = { maxSteps: 200, maxRepeatedToolCalls: 5, maxConsecutiveFailures: 5 };

export interface BudgetView {
  usage: Usage;
  step: number;
  /** Milliseconds the run has spent running (not paused). */
  activeMs: number;
  repeatedToolCalls: number;
}

/** The first budget that the run has used up, as a reason a person can read. */
export function trippedBudget(budgets: Budgets, view: BudgetView): string | undefined {
  const tokens = view.usage.inputTokens + view.usage.outputTokens;
  if (budgets.maxTokens !== undefined && tokens >= budgets.maxTokens) return `budget_tokens: ${tokens} of ${budgets.maxTokens} tokens used`;
  if (budgets.maxCostUsd !== undefined && view.usage.costUsd >= budgets.maxCostUsd)
    return `budget_cost: $${view.usage.costUsd.toFixed(4)} of $${budgets.maxCostUsd} spent`;
  if (budgets.maxSteps !== undefined && view.step >= budgets.maxSteps) return `budget_steps: ${view.step} of ${budgets.maxSteps} steps`;
  if (budgets.maxWallTimeMs !== undefined && view.activeMs >= budgets.maxWallTimeMs)
    return `budget_time: ${Math.round(view.activeMs)} of ${budgets.maxWallTimeMs} ms`;
  if (budgets.maxRepeatedToolCalls !== undefined && view.repeatedToolCalls >= budgets.maxRepeatedToolCalls)
    return `loop_detected: the same tool call ${view.repeatedToolCalls} times in a row`;
  return undefined;
}
