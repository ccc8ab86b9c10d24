import { useState } from "preact/hooks";
import type { ReceivedRun } from "../api/runs-feed.js";
import type { Json, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { clockTime, formatDuration } from "../ui/format.js";
import { Icon, Spinner } from "../ui/icons.js";
import { JsonView } from "../ui/json-view.js";
import { useNow } from "../ui/use-now.js";
import { waitingForWorker, type WorkerWait } from "../../../src/engine/worker-wait.js";
import { ApprovalPanel } from "./approval-panel.js";
import { RaiseBudgets } from "./raise-budgets.js";
import type { RunControls } from "./use-run-controls.js";

function WaitingTimer(props: { received: ReceivedRun }) {
  const now = useNow(100);
  const { run, receivedAt } = props.received;
  const base = run.waitingForMs ?? (run.inflight ? Math.max(0, receivedAt - run.inflight.startedAt) : 0);
  return <span class="timer mono" data-testid="waiting-timer">{formatDuration(base + (now - receivedAt))}</span>;
}

/** How long the run has waited for a worker, ticking from when its view arrived (the server's count first, else this clock's). */
export function workerWaitNow(received: ReceivedRun, now: number): WorkerWait | null {
  const { run, receivedAt } = received;
  if (run.waitingForWorker) return { since: run.waitingForWorker.since, forMs: run.waitingForWorker.forMs + Math.max(0, now - receivedAt) };
  return waitingForWorker(run, now);
}

function WorkerWaitPanel(props: { received: ReceivedRun }) {
  const now = useNow(1000);
  const wait = workerWaitNow(props.received, now);
  if (!wait) return null;
  return (
    <div class="panel panel-warn" data-testid="worker-wait-panel">
      <Icon name="pause" />
      <div>
        <strong>Waiting for a worker</strong> for {formatDuration(wait.forMs)}: {props.received.run.status === "queued" ? "it is queued" : `it reads ${props.received.run.status}`}, but no worker has claimed it, so nothing runs it yet.
        <div class="muted small">
          Start a worker with this agent's code: <code>tether worker</code> or <code>tether serve</code> on the same database.
        </div>
      </div>
    </div>
  );
}

function PausingPanel(props: { received: ReceivedRun }) {
  const { run } = props.received;
  const waiting = run.waitingFor ?? (run.inflight ? { kind: run.inflight.kind, name: run.inflight.name } : null);
  return (
    <div class="panel panel-warn" data-testid="pausing-panel">
      <Spinner />
      <div>
        <strong>Pausing.</strong>{" "}
        {waiting ? (
          <>
            Waiting for {waiting.kind === "model" ? "the model call" : waiting.kind} {waiting.kind !== "model" && <code>{waiting.name}</code>} to finish, <WaitingTimer received={props.received} />
            <div class="muted small">{waiting.kind === "tool" ? "This tool cannot be aborted; its result will be journaled, then the run pauses. No new call starts meanwhile." : "No new call starts meanwhile."}</div>
          </>
        ) : (
          <>No new call starts; the run pauses at this step boundary.</>
        )}
      </div>
    </div>
  );
}

function StalePanel(props: { problem: Extract<NonNullable<RunControls["problem"]>, { kind: "stale" }>; controls: RunControls; onRefresh: () => Promise<void> }) {
  const [refreshedAt, setRefreshedAt] = useState<number | null>(null);
  const [refreshing, setRefreshing] = useState(false);
  return (
    <div class="panel panel-danger" data-testid="stale-panel">
      <Icon name="alert" />
      <div class="stack-sm grow">
        <strong>Resume refused: the snapshot is stale.</strong>
        <p class="small">The world may have moved on since this run paused. Continuing as if it had not could undo someone else's work.</p>
        <ul class="reasons">
          {(props.problem.reasons.length ? props.problem.reasons : [props.problem.message]).map((r) => (
            <li key={r}>{r}</li>
          ))}
        </ul>
        {refreshedAt && <p class="small muted">State re-read at {clockTime(refreshedAt)}: review it below, edit it if needed, then resume again.</p>}
        <div class="row">
          <button
            class="btn"
            disabled={refreshing}
            onClick={async () => {
              setRefreshing(true);
              await props.onRefresh();
              setRefreshedAt(Date.now());
              setRefreshing(false);
            }}
            data-testid="stale-refresh"
          >
            <Icon name="refresh" /> Refresh
          </button>
          <button class="btn btn-warn" onClick={() => void props.controls.resume({ force: true })} disabled={props.controls.busy !== null} data-testid="resume-anyway">
            Resume anyway
          </button>
          <button class="btn btn-ghost" onClick={props.controls.clearProblem}>
            Dismiss
          </button>
        </div>
      </div>
    </div>
  );
}

function UncertainPanel(props: { run: RunView; controls: RunControls; message?: string }) {
  const { identity } = useApp();
  const [doneOpen, setDoneOpen] = useState(false);
  const [result, setResult] = useState("");
  const [resultError, setResultError] = useState<string | null>(null);
  const allowed = roleAllows(identity.role, "operator") && props.run.status === "paused";
  const inflight = props.run.inflight;
  const markDone = () => {
    let value: Json | undefined;
    if (result.trim()) {
      try {
        value = JSON.parse(result) as Json;
      } catch (error) {
        setResultError(`Not JSON: ${(error as Error).message}`);
        return;
      }
    }
    void props.controls.resume({ resolve: value === undefined ? { action: "done", noResult: true } : { action: "done", result: value } });
  };
  return (
    <div class="panel panel-danger" data-testid="uncertain-panel">
      <Icon name="alert" />
      <div class="stack-sm grow">
        <strong>
          An effect is uncertain: {inflight ? <code>{inflight.name}</code> : "a tool"} {inflight && <span class="muted">(call #{inflight.callSeq})</span>}
        </strong>
        <p class="small">{props.message ?? "The worker stopped while this tool was running; it declares neither idempotency nor a check, so it may or may not have happened. Tether will not guess."}</p>
        <div class="row">
          <button class="btn" disabled={!allowed || props.controls.busy !== null} onClick={() => void props.controls.resume({ resolve: "retry" })} title="Run the tool again with the same idempotency key" data-testid="resolve-retry">
            Retry
          </button>
          <button class="btn" disabled={!allowed || props.controls.busy !== null} onClick={() => void props.controls.resume({ resolve: "skip" })} title="Continue as if the call failed; the agent sees it as skipped" data-testid="resolve-skip">
            Skip
          </button>
          <button class="btn" disabled={!allowed || props.controls.busy !== null} onClick={() => setDoneOpen((o) => !o)} title="It did happen: continue with a result you give" data-testid="resolve-done">
            Mark done…
          </button>
        </div>
        {doneOpen && (
          <div class="stack-sm">
            <label class="field">
              <span class="label">Result the agent should see (JSON, optional)</span>
              <textarea class="input mono" rows={3} value={result} onInput={(e) => setResult((e.target as HTMLTextAreaElement).value)} placeholder='{"ok": true}' />
            </label>
            {resultError && <p class="error-text">{resultError}</p>}
            <div class="row">
              <button class="btn btn-primary" onClick={markDone} disabled={props.controls.busy !== null}>
                Mark done and resume
              </button>
            </div>
          </div>
        )}
      </div>
    </div>
  );
}

function CancelReportPanel(props: { run: RunView }) {
  const report = props.run.report;
  if (!report) return null;
  const problems = report.failed.length + report.uncertain.length + report.releaseFailed.length;
  return (
    <div class={`panel ${problems ? "panel-danger" : "panel-neutral"}`} data-testid="cancel-report">
      <Icon name={problems ? "alert" : "undo"} />
      <div class="stack-sm grow">
        <strong>{problems ? "Cancelled, but some effects need a person." : "Cancelled cleanly."}</strong>
        <div class="report-grid">
          <div>
            <div class="label">Undone</div>
            {report.compensated.length ? report.compensated.map((c) => <div key={c.callSeq} class="report-ok">✓ {c.tool} <span class="muted">#{c.callSeq}</span></div>) : <div class="muted">nothing to undo</div>}
          </div>
          {(report.kept?.length ?? 0) > 0 && (
            <div data-testid="report-kept">
              <div class="label">Kept for forks</div>
              {report.kept!.map((c) => (
                <div key={c.callSeq} class="report-warn">
                  ⑂ {c.tool} <span class="muted">#{c.callSeq}</span>: not undone, inherited by {c.forks.join(", ")}
                </div>
              ))}
            </div>
          )}
          {report.failed.length > 0 && (
            <div>
              <div class="label">Undo failed</div>
              {report.failed.map((c) => (
                <div key={c.callSeq} class="report-bad">
                  ✗ {c.tool} <span class="muted">#{c.callSeq}</span>: {c.error}
                </div>
              ))}
            </div>
          )}
          {report.uncertain.length > 0 && (
            <div>
              <div class="label">Uncertain</div>
              {report.uncertain.map((c) => (
                <div key={c.callSeq} class="report-warn">
                  ? {c.tool} <span class="muted">#{c.callSeq}</span>: {c.reason}
                </div>
              ))}
            </div>
          )}
          <div>
            <div class="label">Released</div>
            {report.released.length ? report.released.map((r) => <div key={r}>{r}</div>) : <div class="muted">no resources held</div>}
            {report.releaseFailed.map((r) => (
              <div key={r.name} class="report-bad">
                ✗ {r.name}: {r.error}
              </div>
            ))}
          </div>
        </div>
      </div>
    </div>
  );
}

/** Calls in flight at once (a turn's tool calls, gates awaited together), side by side, each with how long it has run. */
function InFlightPanel(props: { received: ReceivedRun }) {
  const now = useNow(250);
  const { run, receivedAt } = props.received;
  const calls = run.inflightCalls ?? [];
  const waitingSeq = run.waitingFor?.callSeq;
  return (
    <div class="panel panel-neutral" data-testid="inflight-calls">
      <Spinner />
      <div>
        <strong>{calls.length} calls in flight</strong>
        <ul class="inflight-list">
          {calls.map((call) => (
            <li key={call.callSeq} data-testid="inflight-call">
              {call.kind === "model" ? "model" : "tool"} <code>{call.name}</code> <span class="muted">(call #{call.callSeq})</span>{" "}
              <span class="timer mono">{formatDuration(Math.max(0, receivedAt - call.startedAt) + (now - receivedAt))}</span>
              {call.callSeq === waitingSeq && <span class="muted small"> waited for: cannot be aborted</span>}
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}

/** The banner under the controls: what the run's status means now and what a person can do. */
export function StatusPanels(props: { received: ReceivedRun; controls: RunControls; onRefresh: () => Promise<void>; onOpenCancel: () => void; onRun(run: RunView): void }) {
  const { run } = props.received;
  const { controls } = props;
  const panels = [];
  if (controls.problem?.kind === "stale") panels.push(<StalePanel key="stale" problem={controls.problem} controls={controls} onRefresh={props.onRefresh} />);
  if ((run.inflightCalls?.length ?? 0) > 1 && (run.status === "running" || run.status === "pausing" || run.status === "cancelling")) panels.push(<InFlightPanel key="inflight" received={props.received} />);
  if (run.inflight?.uncertain || controls.problem?.kind === "uncertain") panels.push(<UncertainPanel key="uncertain" run={run} controls={controls} message={controls.problem?.kind === "uncertain" ? controls.problem.message : undefined} />);
  if (run.status === "queued" || run.status === "running" || run.status === "pausing" || run.status === "cancelling") panels.push(<WorkerWaitPanel key="worker-wait" received={props.received} />);
  switch (run.status) {
    case "pausing":
      panels.push(<PausingPanel key="pausing" received={props.received} />);
      break;
    case "paused":
      // An uncertain effect is why it paused; its panel says so.
      if (run.inflight?.uncertain) break;
      if (run.approvals?.some((a) => !a.decision)) {
        panels.push(<ApprovalPanel key="approval" run={run} onRun={props.onRun} />);
        break;
      }
      panels.push(
        <div key="paused" class="panel panel-warn" data-testid="paused-panel">
          <Icon name="pause" />
          <div>
            <strong>Paused</strong>
            {run.statusReason ? <span>: {run.statusReason}</span> : null}
            <div class="muted small">Nothing runs and no memory is held. Inspect the state, add a message or edit the vars below, then resume.</div>
            {/^budget_/.test(run.statusReason ?? "") && <RaiseBudgets run={run} controls={controls} />}
          </div>
        </div>,
      );
      break;
    case "halted":
      panels.push(
        <div key="halted" class="panel panel-halt" data-testid="halted-panel">
          <Icon name="shield" />
          <div>
            <strong>Halted by the kill switch</strong>
            {run.statusReason ? <span>: {run.statusReason}</span> : null}
            <div class="small">Every call was aborted and no compensation ran; the state is kept. When the halt is lifted this run is paused.</div>
          </div>
        </div>,
      );
      break;
    case "cancelling":
      panels.push(
        <div key="cancelling" class="panel panel-danger" data-testid="cancelling-panel">
          <Spinner />
          <div>
            <strong>Cancelling</strong>: undoing effects newest first, then releasing resources.{" "}
            <button class="btn-link" onClick={props.onOpenCancel}>
              Show progress
            </button>
          </div>
        </div>,
      );
      break;
    case "cancelled":
      panels.push(<CancelReportPanel key="report" run={run} />);
      break;
    case "failed":
      panels.push(
        <div key="failed" class="panel panel-danger" data-testid="failed-panel">
          <Icon name="alert" />
          <div>
            <strong>Failed</strong>
            {run.error ? (
              <span>
                : <code>{run.error.code}</code> {run.error.message}
              </span>
            ) : null}
          </div>
        </div>,
      );
      break;
    case "completed":
      panels.push(
        <div key="completed" class="panel panel-success" data-testid="completed-panel">
          <Icon name="check" />
          <div class="grow">
            <strong>Completed</strong>
            {run.output !== null && (typeof run.output === "string" ? <p class="output-text">{run.output}</p> : <JsonView value={run.output} maxHeight={240} />)}
          </div>
        </div>,
      );
      break;
    default:
      break;
  }
  return panels.length ? <div class="stack-sm">{panels}</div> : null;
}
