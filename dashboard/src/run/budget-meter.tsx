import type { ReceivedRun } from "../api/runs-feed.js";
import { formatCost, formatDuration, formatTokens } from "../ui/format.js";
import { useNow } from "../ui/use-now.js";
import { activeMsNow } from "./active-time.js";

function Meter(props: { label: string; value: number; max?: number; format: (n: number) => string; testId: string }) {
  const ratio = props.max ? Math.min(1, props.value / props.max) : 0;
  const tone = !props.max ? "none" : ratio >= 1 ? "over" : ratio >= 0.8 ? "near" : "ok";
  return (
    <div class="meter" data-testid={props.testId}>
      <div class="meter-head">
        <span class="label">{props.label}</span>
        <span class="mono">
          {props.format(props.value)}
          {props.max !== undefined ? <span class="muted"> / {props.format(props.max)}</span> : <span class="muted"> · no budget</span>}
        </span>
      </div>
      <div class={`meter-bar meter-${tone}`} role="meter" aria-valuemin={0} aria-valuemax={props.max ?? 0} aria-valuenow={props.value} aria-label={props.label}>
        <span style={{ width: `${(ratio * 100).toFixed(1)}%` }} />
      </div>
    </div>
  );
}

/** Tokens, cost, steps and running time against the run's budgets; reaching one pauses the run. */
export function BudgetMeter(props: { received: ReceivedRun }) {
  const { run } = props.received;
  const now = useNow(1000, run.status === "running");
  const active = activeMsNow(props.received, now);
  const { usage, budgets } = run;
  return (
    <section class="card" data-testid="budgets">
      <header class="card-head">
        <h2>Usage</h2>
      </header>
      <div class="pad stack">
        <Meter label="Tokens" value={usage.inputTokens + usage.outputTokens} max={budgets.maxTokens} format={formatTokens} testId="meter-tokens" />
        <Meter label="Cost" value={usage.costUsd} max={budgets.maxCostUsd} format={formatCost} testId="meter-cost" />
        <Meter label="Steps" value={run.step} max={budgets.maxSteps} format={(n) => String(n)} testId="meter-steps" />
        {budgets.maxWallTimeMs !== undefined && <Meter label="Running time" value={active} max={budgets.maxWallTimeMs} format={formatDuration} testId="meter-time" />}
        <div class="kv small muted">
          <span>in {formatTokens(usage.inputTokens)}</span>
          <span>out {formatTokens(usage.outputTokens)}</span>
          {usage.cachedInputTokens > 0 && <span>cached {formatTokens(usage.cachedInputTokens)}</span>}
          <span>active {formatDuration(active)}</span>
        </div>
      </div>
    </section>
  );
}
