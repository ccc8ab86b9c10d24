import type { RunStatus } from "../api/types.js";
import type { CallStatus } from "../run/timeline-model.js";

const activeStatuses = new Set<string>(["running", "pausing", "cancelling", "queued", "compensating"]);

const callLabels: Record<CallStatus, string> = {
  running: "running",
  completed: "completed",
  failed: "failed",
  aborted: "aborted",
  uncertain: "uncertain",
  compensating: "compensating",
  compensated: "compensated",
  compensation_failed: "undo failed",
};

/** A run's status as a coloured pill; statuses that are still moving pulse. */
export function StatusBadge(props: { status: RunStatus; large?: boolean }) {
  return (
    <span class={`badge status-${props.status}${props.large ? " badge-lg" : ""}`} data-status={props.status} data-testid="run-status">
      <span class={`dot${activeStatuses.has(props.status) ? " pulse" : ""}`} aria-hidden="true" />
      {props.status}
    </span>
  );
}

export function CallStatusBadge(props: { status: CallStatus }) {
  return (
    <span class={`badge call-${props.status}`} data-call-status={props.status}>
      <span class={`dot${activeStatuses.has(props.status) ? " pulse" : ""}`} aria-hidden="true" />
      {callLabels[props.status]}
    </span>
  );
}
