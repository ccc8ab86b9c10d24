import { useState } from "preact/hooks";
import type { Budgets, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import type { RunControls } from "./use-run-controls.js";

/** A run paused by a budget can go on with a higher one: raise it and resume in one step. */
export function RaiseBudgets(props: { run: RunView; controls: RunControls }) {
  const { identity } = useApp();
  const { budgets, usage, step } = props.run;
  const tokens = usage.inputTokens + usage.outputTokens;
  const [maxTokens, setMaxTokens] = useState(String(budgets.maxTokens !== undefined ? Math.max(budgets.maxTokens * 2, tokens * 2) : ""));
  const [maxCost, setMaxCost] = useState(budgets.maxCostUsd !== undefined ? String(Math.max(budgets.maxCostUsd * 2, usage.costUsd * 2)) : "");
  const [maxSteps, setMaxSteps] = useState(budgets.maxSteps !== undefined ? String(Math.max(budgets.maxSteps * 2, step + 10)) : "");
  const allowed = roleAllows(identity.role, "operator");
  const raise = () => {
    const next: Budgets = {};
    const n = (text: string) => (text.trim() !== "" && Number(text) > 0 ? Number(text) : undefined);
    if (n(maxTokens)) next.maxTokens = Math.round(n(maxTokens)!);
    if (n(maxCost)) next.maxCostUsd = n(maxCost);
    if (n(maxSteps)) next.maxSteps = Math.round(n(maxSteps)!);
    void props.controls.resume({ budgets: next });
  };
  return (
    <div class="raise-budgets" data-testid="raise-budgets">
      <label class="field">
        <span class="label">Max tokens</span>
        <input class="input" inputMode="numeric" value={maxTokens} onInput={(e) => setMaxTokens((e.target as HTMLInputElement).value)} disabled={!allowed} />
      </label>
      <label class="field">
        <span class="label">Max cost (USD)</span>
        <input class="input" inputMode="decimal" value={maxCost} onInput={(e) => setMaxCost((e.target as HTMLInputElement).value)} disabled={!allowed} />
      </label>
      <label class="field">
        <span class="label">Max steps</span>
        <input class="input" inputMode="numeric" value={maxSteps} onInput={(e) => setMaxSteps((e.target as HTMLInputElement).value)} disabled={!allowed} data-testid="raise-steps" />
      </label>
      <button class="btn btn-primary" onClick={raise} disabled={!allowed || props.controls.busy !== null} data-testid="raise-and-resume">
        Raise and resume
      </button>
    </div>
  );
}
