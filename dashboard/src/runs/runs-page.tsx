import { useEffect, useMemo, useState } from "preact/hooks";
import type { RunStatus, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { formatAge, formatCost, formatDuration, formatTokens, fullTime, shortId } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { Link, navigate } from "../ui/router.js";
import { StatusBadge } from "../ui/status-badge.js";
import { useNow } from "../ui/use-now.js";
import { waitingForWorker } from "../../../src/engine/worker-wait.js";
import { inputPreview } from "./run-input.js";
import { StartRunDialog } from "./start-run-dialog.js";
import { useWaitStarts, waitingForPerson, waitReasonLabel } from "./waiting.js";

type Filter = "all" | "active" | "waiting" | RunStatus;

const activeStatuses: RunStatus[] = ["queued", "running", "pausing", "paused", "cancelling", "halted"];
const filterOrder: Filter[] = ["all", "active", "waiting", "running", "paused", "halted", "completed", "cancelled", "failed"];

function matches(filter: Filter, run: RunView): boolean {
  if (filter === "all") return true;
  if (filter === "waiting") return waitingForPerson(run) !== null;
  if (filter === "active") return activeStatuses.includes(run.status);
  if (filter === "paused") return run.status === "paused" || run.status === "pausing";
  if (filter === "cancelled") return run.status === "cancelled" || run.status === "cancelling";
  if (filter === "running") return run.status === "running" || run.status === "queued";
  return run.status === filter;
}

function filterFromUrl(): Filter {
  const value = new URLSearchParams(location.search).get("status");
  return (filterOrder as string[]).includes(value ?? "") ? (value as Filter) : "all";
}

function useFeedRuns(): RunView[] {
  const { feed } = useApp();
  const [runs, setRuns] = useState(() => feed.all());
  useEffect(() => {
    let frame = 0;
    const update = () => {
      if (frame) return;
      frame = window.setTimeout(() => {
        frame = 0;
        setRuns(feed.all());
      }, 50);
    };
    setRuns(feed.all());
    const unsubscribe = feed.subscribe(update);
    return () => {
      unsubscribe();
      window.clearTimeout(frame);
    };
  }, [feed]);
  return runs;
}

function filterLabel(filter: Filter): string {
  if (filter === "all") return "All";
  if (filter === "active") return "Active";
  if (filter === "waiting") return "Waiting for someone";
  return filter[0].toUpperCase() + filter.slice(1);
}

export function RunsPage() {
  const { identity, client } = useApp();
  const runs = useFeedRuns();
  const now = useNow(5000);
  const [filter, setFilterState] = useState<Filter>(filterFromUrl);
  const [starting, setStarting] = useState(false);
  const canStart = roleAllows(identity.role, "operator");

  const setFilter = (next: Filter) => {
    setFilterState(next);
    history.replaceState(null, "", next === "all" ? "/" : `/?status=${next}`);
  };

  const counts = useMemo(() => {
    const result = new Map<Filter, number>();
    for (const f of filterOrder) result.set(f, runs.filter((r) => matches(f, r)).length);
    return result;
  }, [runs]);
  const waiting = filter === "waiting";
  const waitStarts = useWaitStarts(client, runs, waiting);
  const shown = runs.filter((r) => matches(filter, r));
  // Waiting for someone: the longest wait first.
  if (waiting) shown.sort((a, b) => (waitStarts.get(a.id) ?? a.updatedAt) - (waitStarts.get(b.id) ?? b.updatedAt) || a.id.localeCompare(b.id));

  return (
    <section class="stack-lg">
      <div class="page-head">
        <div>
          <h1>Runs</h1>
          <p class="muted">{runs.length === 0 ? "No runs yet" : `${counts.get("active")} active · ${runs.length} in all`}</p>
        </div>
        <button
          class="btn btn-primary"
          onClick={() => setStarting(true)}
          disabled={!canStart}
          title={canStart ? "Start a run of a registered agent" : "Starting runs needs the operator role"}
          data-testid="start-run"
        >
          <Icon name="plus" /> Start a run
        </button>
      </div>

      <div class="filters" role="tablist" aria-label="Filter by status">
        {filterOrder.map((f) => (
          <button key={f} role="tab" aria-selected={filter === f} class={`chip${filter === f ? " chip-on" : ""}${f !== "all" && f !== "active" ? ` chip-${f}` : ""}`} onClick={() => setFilter(f)} data-filter={f}>
            {filterLabel(f)}
            <span class="chip-count">{counts.get(f) ?? 0}</span>
          </button>
        ))}
      </div>

      {shown.length === 0 ? (
        <div class="card empty">
          {runs.length === 0 ? (
            <>
              <h2>No runs yet</h2>
              <p class="muted">
                Start one with the button above, or from a terminal: <code>tether start deep-research "your question"</code>
              </p>
            </>
          ) : (
            <p class="muted">{waiting ? "No run waits for a person." : `No ${filter} runs.`}</p>
          )}
        </div>
      ) : (
        <div class="card table-card">
          <table class="runs-table" data-testid="runs-table">
            <thead>
              <tr>
                <th>Status</th>
                {waiting && <th>Waiting for</th>}
                <th>Run</th>
                <th>Agent</th>
                <th class="num">Step</th>
                <th class="num">Tokens</th>
                <th class="num">Cost</th>
                <th class="num">{waiting ? "Waiting" : "Started"}</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((run) => (
                <tr key={run.id} class="run-row" data-run-id={run.id} onClick={() => navigate(`/runs/${run.id}`)}>
                  <td data-label="Status">
                    <StatusBadge status={run.status} />
                    {(run.waitingForWorker ?? waitingForWorker(run, now)) && (
                      <div class="muted small" data-testid="worker-wait" title="No worker has claimed this run: start `tether worker` or `tether serve` with its agent">
                        waiting for a worker
                      </div>
                    )}
                  </td>
                  {waiting && <WaitReasonCell run={run} />}
                  <td class="run-cell" data-label="Run">
                    <Link href={`/runs/${run.id}`} class="mono run-link" title={run.id}>
                      {shortId(run.id)}
                    </Link>
                    <span class="run-input" title={inputPreview(run.input)}>
                      {run.forkedFrom && <span class="fork-tag">fork of {shortId(run.forkedFrom.runId)} @ step {run.forkedFrom.step}</span>}
                      {inputPreview(run.input)}
                    </span>
                  </td>
                  <td data-label="Agent">
                    <span class="agent-name">{run.agent}</span>
                  </td>
                  <td class="num" data-label="Step">
                    {run.step}
                  </td>
                  <td class="num" data-label="Tokens">
                    {formatTokens(run.usage.inputTokens + run.usage.outputTokens)}
                  </td>
                  <td class="num" data-label="Cost">
                    {formatCost(run.usage.costUsd)}
                  </td>
                  {waiting ? (
                    <WaitSinceCell since={waitStarts.get(run.id)} now={now} />
                  ) : (
                    <td class="num muted" data-label="Started" title={fullTime(run.createdAt)}>
                      {formatAge(run.createdAt, now)}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {starting && <StartRunDialog onClose={() => setStarting(false)} />}
    </section>
  );
}

function WaitReasonCell(props: { run: RunView }) {
  const wait = waitingForPerson(props.run);
  if (!wait) return <td data-label="Waiting for" />;
  return (
    <td data-label="Waiting for" data-testid="wait-reason" data-reason={wait.reason} title={wait.detail}>
      {waitReasonLabel(wait.reason)}
    </td>
  );
}

function WaitSinceCell(props: { since: number | undefined; now: number }) {
  const { since, now } = props;
  return (
    <td class="num muted" data-label="Waiting" data-testid="wait-since" title={since === undefined ? undefined : `since ${fullTime(since)}`}>
      {since === undefined ? "…" : formatDuration(Math.max(0, now - since))}
    </td>
  );
}
