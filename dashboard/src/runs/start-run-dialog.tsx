import { useEffect, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { AgentInfo, Budgets } from "../api/types.js";
import { useApp } from "../app-context.js";
import { Dialog } from "../ui/dialog.js";
import { navigate } from "../ui/router.js";
import { parseInput } from "./run-input.js";

const examplePrompts: Record<string, string> = {
  "deep-research": "What are the trade-offs between pausing and cancelling a long-running AI agent?",
  "code-agent": "Fix the failing test in the workspace and open a pull request.",
  "browser-flow": "Book the cheapest refundable ticket on the demo site.",
};

function numberOrUndefined(text: string): number | undefined {
  const n = Number(text);
  return text.trim() !== "" && Number.isFinite(n) && n > 0 ? n : undefined;
}

export function StartRunDialog(props: { onClose: () => void }) {
  const { client } = useApp();
  const [agents, setAgents] = useState<AgentInfo[] | null>(null);
  const [agent, setAgent] = useState("");
  const [input, setInput] = useState("");
  const [maxTokens, setMaxTokens] = useState("");
  const [maxCost, setMaxCost] = useState("");
  const [maxSteps, setMaxSteps] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    client.agents().then(
      (list) => {
        setAgents(list);
        if (list[0]) setAgent(list[0].name);
      },
      (e: unknown) => setError(errorMessage(e)),
    );
  }, [client]);

  const selected = agents?.find((a) => a.name === agent);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (!agent || !input.trim()) return;
    const budgets: Budgets = {};
    const tokens = numberOrUndefined(maxTokens);
    const cost = numberOrUndefined(maxCost);
    const steps = numberOrUndefined(maxSteps);
    if (tokens) budgets.maxTokens = Math.round(tokens);
    if (cost) budgets.maxCostUsd = cost;
    if (steps) budgets.maxSteps = Math.round(steps);
    setBusy(true);
    setError(null);
    try {
      const run = await client.start(agent, parseInput(input), Object.keys(budgets).length ? budgets : undefined);
      props.onClose();
      navigate(`/runs/${run.id}`);
    } catch (e) {
      setError(errorMessage(e));
      setBusy(false);
    }
  };

  return (
    <Dialog title="Start a run" onClose={props.onClose} busy={busy} testId="start-dialog">
      <form class="dialog-body stack" onSubmit={submit}>
        {agents === null && !error && <p class="muted">Loading agents…</p>}
        {agents && agents.length === 0 && <p class="muted">No agents are registered with this server.</p>}
        {agents && agents.length > 0 && (
          <>
            <div class="agent-picker" role="radiogroup" aria-label="Agent">
              {agents.map((a) => (
                <label key={a.name} class={`agent-option${a.name === agent ? " selected" : ""}`}>
                  <input type="radio" name="agent" value={a.name} checked={a.name === agent} onChange={() => setAgent(a.name)} />
                  <span class="agent-option-name">
                    {a.name} <span class="muted">v{a.version}</span>
                  </span>
                  {a.description && <span class="agent-option-desc">{a.description}</span>}
                  <span class="agent-tools">
                    {a.tools.map((t) => (
                      <span key={t.name} class={`tool-chip${t.compensates ? " tool-chip-undo" : ""}`} title={[t.description, t.compensates ? "undone on cancel" : "", t.idempotent ? "idempotent" : "", t.abortable ? "abortable" : ""].filter(Boolean).join(" · ")}>
                        {t.name}
                      </span>
                    ))}
                  </span>
                </label>
              ))}
            </div>
            <label class="field">
              <span class="label">Input</span>
              <textarea
                class="input"
                rows={3}
                placeholder={examplePrompts[agent] ?? "What should the agent do?"}
                value={input}
                onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)}
                data-testid="start-input"
                onKeyDown={(e) => {
                  if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) void submit(e);
                }}
              />
              <span class="hint">Plain text is sent as the prompt; a JSON object or array is sent as is.</span>
            </label>
            <details class="budgets-form">
              <summary>Budgets</summary>
              <div class="grid-3">
                <label class="field">
                  <span class="label">Max tokens</span>
                  <input class="input" inputMode="numeric" value={maxTokens} onInput={(e) => setMaxTokens((e.target as HTMLInputElement).value)} placeholder="none" />
                </label>
                <label class="field">
                  <span class="label">Max cost (USD)</span>
                  <input class="input" inputMode="decimal" value={maxCost} onInput={(e) => setMaxCost((e.target as HTMLInputElement).value)} placeholder="none" />
                </label>
                <label class="field">
                  <span class="label">Max steps</span>
                  <input class="input" inputMode="numeric" value={maxSteps} onInput={(e) => setMaxSteps((e.target as HTMLInputElement).value)} placeholder={selected ? "agent default" : ""} />
                </label>
              </div>
              <p class="hint">A run that reaches a budget pauses (it is not cancelled); raise it and resume.</p>
            </details>
          </>
        )}
        {error && <p class="error-text">{error}</p>}
        <div class="row-end">
          <button type="button" class="btn btn-ghost" onClick={props.onClose} disabled={busy}>
            Close
          </button>
          <button type="submit" class="btn btn-primary" disabled={busy || !agent || !input.trim()} data-testid="start-submit">
            {busy ? "Starting…" : "Start run"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
