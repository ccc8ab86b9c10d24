import { useState } from "preact/hooks";
import type { RunView, StateResponse } from "../api/types.js";
import { clockTime, formatCost, formatDuration, formatTokens, fullTime } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { JsonView } from "../ui/json-view.js";
import { CallStatusBadge } from "../ui/status-badge.js";
import { useNow } from "../ui/use-now.js";
import { modelText, modelToolCalls, toolResult } from "./call-text.js";
import { callStatus, type CallView, type MarkerView, type Timeline } from "./timeline-model.js";

interface CallRowProps {
  call: CallView;
  texts: ReadonlyMap<number, string>;
  state: StateResponse | null;
  canFork: boolean;
  onFork: (step: number) => void;
  forking: boolean;
  now: number;
}

function firstLine(text: string | undefined, max = 140): string {
  if (!text) return "";
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

function summary(call: CallView, props: CallRowProps): string {
  if (call.kind === "model") {
    const text = modelText(call, props.texts, props.state);
    const tools = modelToolCalls(call, props.state);
    const asks = tools.length ? ` → ${tools.map((t) => t.toolName).join(", ")}` : "";
    return firstLine(text) + asks;
  }
  return firstLine(call.input === undefined ? "" : JSON.stringify(call.input), 120);
}

function CallDetails(props: CallRowProps) {
  const { call, state } = props;
  const tokens = call.usage ? call.usage.inputTokens + call.usage.outputTokens : undefined;
  const result = call.kind === "tool" ? toolResult(call, state) : undefined;
  return (
    <div class="call-details" data-testid="call-details">
      {call.kind === "model" ? (
        <>
          <div class="detail-label">Request</div>
          <div class="small">
            {call.request?.messages ?? 0} messages, {call.request?.tools ?? 0} tools offered
          </div>
          <div class="detail-label">Response</div>
          <p class="response-text">{modelText(call, props.texts, state) ?? <span class="muted">{call.outcome ? "(no text)" : "streaming…"}</span>}</p>
          {modelToolCalls(call, state).length > 0 && (
            <>
              <div class="detail-label">Tool calls requested</div>
              <JsonView value={modelToolCalls(call, state)} maxHeight={200} />
            </>
          )}
          {call.usage && (
            <div class="kv small">
              <span>input {formatTokens(call.usage.inputTokens)}</span>
              <span>output {formatTokens(call.usage.outputTokens)}</span>
              {call.usage.cachedInputTokens > 0 && <span>cached {formatTokens(call.usage.cachedInputTokens)}</span>}
              <span>{formatCost(call.usage.costUsd)}</span>
              {call.estimated && <span class="muted">(estimated: the stream was cut)</span>}
              {call.finishReason && <span class="muted">finish: {call.finishReason}</span>}
            </div>
          )}
        </>
      ) : (
        <>
          <div class="detail-label">Arguments</div>
          <JsonView value={call.input ?? null} maxHeight={200} />
          {result && (
            <>
              <div class="detail-label">Result{call.resultInMessage !== undefined ? <span class="muted"> (state message #{call.resultInMessage})</span> : null}</div>
              {result === "loading" ? <p class="muted small">Loading from the state…</p> : <JsonView value={result.value} maxHeight={280} testId="call-result" />}
            </>
          )}
        </>
      )}
      {call.error && (
        <p class="error-text">
          <code>{call.error.code}</code> {call.error.message}
        </p>
      )}
      {call.outcome === "aborted" && <p class="small muted">Aborted ({call.reason ?? "aborted"}). {call.kind === "model" ? "Tokens used so far are counted; the call is issued again on resume." : ""}</p>}
      {call.outcome === "aborted" && call.partialText !== undefined && (
        <blockquote class="partial-text small" data-testid="partial-text">
          <span class="muted">What it had said when it stopped{call.partialTextTruncated ? " (its end)" : ""}:</span> {call.partialTextTruncated ? "… " : ""}
          {call.partialText}
        </blockquote>
      )}
      {call.outcome === "uncertain" && <p class="small warn-text">Uncertain: {call.reason}</p>}
      {call.resolved && (
        <p class="small">
          Resolved by {call.resolved.actor}: <strong>{call.resolved.decision}</strong>
        </p>
      )}
      {call.progress.length > 0 && (
        <>
          <div class="detail-label">Progress</div>
          <JsonView value={call.progress} maxHeight={160} />
        </>
      )}
      {call.compensation && (
        <p class={`small ${call.compensation.state === "failed" ? "error-text" : ""}`}>
          <Icon name="undo" /> {call.compensation.state === "compensated" ? "Undone on cancel" : call.compensation.state === "failed" ? "Undo failed" : "Undoing…"} (attempt {call.compensation.attempts})
          {call.compensation.error ? `: ${call.compensation.error}` : ""} · {clockTime(call.compensation.at)}
        </p>
      )}
      <div class="row small muted">
        <span title={fullTime(call.startedAt)}>started {clockTime(call.startedAt)}</span>
        {tokens !== undefined && <span>{formatTokens(tokens)} tokens</span>}
        {call.step !== undefined && <span>→ step {call.step}</span>}
        {props.canFork && call.step !== undefined && call.outcome === "completed" && (
          <button class="btn btn-sm" onClick={() => props.onFork(call.step!)} disabled={props.forking} data-testid="fork" title={`Start a new run from the state after step ${call.step}`}>
            <Icon name="fork" /> Fork from step {call.step}
          </button>
        )}
      </div>
    </div>
  );
}

function CallRow(props: CallRowProps) {
  const { call, now } = props;
  const [open, setOpen] = useState(false);
  const status = callStatus(call);
  const duration = call.durationMs ?? (call.outcome ? undefined : now - call.startedAt);
  const tokens = call.usage ? call.usage.inputTokens + call.usage.outputTokens : undefined;
  return (
    <li class={`call${open ? " open" : ""}`} data-status={status} data-call-seq={call.callSeq} data-call-kind={call.kind} data-testid="call">
      <button class="call-row" onClick={() => setOpen((o) => !o)} aria-expanded={open}>
        <span class={`call-icon call-icon-${call.kind}`}>
          <Icon name={call.kind === "model" ? "model" : "tool"} />
        </span>
        <span class="call-main">
          <span class="call-title">
            <span class="call-name">{call.name}</span>
            <span class="call-seq mono">#{call.callSeq}</span>
            <CallStatusBadge status={status} />
          </span>
          <span class="call-summary">{summary(call, props)}</span>
        </span>
        <span class="call-metrics">
          <span class="mono">{formatDuration(duration)}</span>
          {tokens !== undefined && <span class="mono muted">{formatTokens(tokens)} tok</span>}
          {call.usage && call.usage.costUsd > 0 && <span class="mono muted">{formatCost(call.usage.costUsd)}</span>}
        </span>
        <Icon name="chevron" class="chevron" />
      </button>
      {open && <CallDetails {...props} />}
    </li>
  );
}

function MarkerRow(props: { marker: MarkerView }) {
  const { marker } = props;
  return (
    <li class={`marker marker-${marker.tone}`} data-marker={marker.status ?? marker.kind}>
      <span class="marker-dot" aria-hidden="true" />
      <span class="marker-title">{marker.title}</span>
      <span class="marker-detail">{marker.detail ?? ""}</span>
      <span class="marker-time mono" title={fullTime(marker.at)}>
        {clockTime(marker.at)}
      </span>
    </li>
  );
}

/** Every call of the run, in order, with status changes and human edits between them. */
export function TimelineView(props: { run: RunView; timeline: Timeline; texts: ReadonlyMap<number, string>; state: StateResponse | null; canFork: boolean; onFork: (step: number) => void; forking: boolean }) {
  const [showMarkers, setShowMarkers] = useState(true);
  const now = useNow(500, props.timeline.current !== undefined);
  const calls = props.timeline.items.filter((i) => i.type === "call").length;
  return (
    <section class="card" data-testid="timeline">
      <header class="card-head">
        <h2>Steps</h2>
        <span class="muted small">
          {calls} calls · step {props.run.step}
        </span>
        <label class="toggle small">
          <input type="checkbox" checked={showMarkers} onChange={(e) => setShowMarkers((e.target as HTMLInputElement).checked)} /> status changes
        </label>
      </header>
      {props.timeline.items.length === 0 ? (
        <p class="muted pad">Nothing has happened yet.</p>
      ) : (
        <ol class="timeline">
          {props.timeline.items.map((item) =>
            item.type === "call" ? (
              <CallRow key={`c${item.call.callSeq}`} call={item.call} texts={props.texts} state={props.state} canFork={props.canFork} onFork={props.onFork} forking={props.forking} now={now} />
            ) : showMarkers ? (
              <MarkerRow key={`m${item.marker.seq}`} marker={item.marker} />
            ) : null,
          )}
        </ol>
      )}
    </section>
  );
}
