import type { ReceivedRun } from "../api/runs-feed.js";
import { formatDuration, fullTime } from "../ui/format.js";
import { Link } from "../ui/router.js";
import { inputPreview } from "../runs/run-input.js";
import { useNow } from "../ui/use-now.js";
import { activeMsNow } from "./active-time.js";

export function RunDetails(props: { received: ReceivedRun }) {
  const { run } = props.received;
  const now = useNow(1000, run.status === "running");
  const resources = Object.entries(run.resources);
  return (
    <section class="card">
      <header class="card-head">
        <h2>Details</h2>
      </header>
      <dl class="details pad">
        <dt>Input</dt>
        <dd class="clamp" title={inputPreview(run.input)}>
          {inputPreview(run.input)}
        </dd>
        <dt>Agent</dt>
        <dd>
          {run.agent} <span class="muted">v{run.agentVersion}</span>
        </dd>
        <dt>Model</dt>
        <dd class="mono">{run.model ?? "agent default"}</dd>
        <dt>Owner</dt>
        <dd>{run.owner}</dd>
        <dt>Created</dt>
        <dd>{fullTime(run.createdAt)}</dd>
        <dt>Snapshot</dt>
        <dd>
          step {run.step} · {fullTime(run.snapshotAt)}
        </dd>
        <dt>Running for</dt>
        <dd>{formatDuration(activeMsNow(props.received, now))}</dd>
        {run.forkedFrom && (
          <>
            <dt>Forked from</dt>
            <dd>
              <Link href={`/runs/${run.forkedFrom.runId}`} class="mono">
                {run.forkedFrom.runId}
              </Link>{" "}
              at step {run.forkedFrom.step}
            </dd>
          </>
        )}
        {resources.length > 0 && (
          <>
            <dt>Resources</dt>
            <dd>
              {resources.map(([name, held]) => (
                <div key={name}>
                  <code>{name}</code> <span class="muted">{held.releasedForPause ? "released for the pause" : "held"}</span>
                </div>
              ))}
            </dd>
          </>
        )}
      </dl>
    </section>
  );
}
