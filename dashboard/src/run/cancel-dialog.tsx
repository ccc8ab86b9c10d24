import { useEffect, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { CancelPreviewResponse, Json, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { Dialog } from "../ui/dialog.js";
import { Icon, Spinner } from "../ui/icons.js";
import type { CallView, Timeline } from "./timeline-model.js";

type Phase = "preview" | "cancelling";

function argsPreview(input: Json): string {
  const text = JSON.stringify(input);
  return text.length > 90 ? `${text.slice(0, 90)}…` : text;
}

function CompensationRow(props: { callSeq: number; tool: string; input: Json; call: CallView | undefined; phase: Phase; cancelled: boolean }) {
  const c = props.call?.compensation;
  let state: "pending" | "compensating" | "compensated" | "failed" | "retrying" = "pending";
  if (c) state = c.state === "compensated" ? "compensated" : c.state === "failed" ? "failed" : c.retrying ? "retrying" : "compensating";
  const label: Record<typeof state, string> = {
    pending: props.phase === "preview" ? "will be undone" : props.cancelled ? "not undone" : "waiting",
    compensating: `undoing… (attempt ${c?.attempts ?? 1})`,
    retrying: `attempt ${c?.attempts ?? 1} failed, retrying`,
    compensated: "undone",
    failed: "undo failed",
  };
  return (
    <li class={`comp comp-${state}`} data-testid="compensation" data-call-seq={props.callSeq} data-state={state}>
      <span class="comp-icon">
        {state === "compensated" ? <Icon name="check" /> : state === "failed" ? <Icon name="alert" /> : state === "compensating" || state === "retrying" ? <Spinner /> : <Icon name="undo" />}
      </span>
      <span class="comp-main">
        <span>
          <code>{props.tool}</code> <span class="mono muted">#{props.callSeq}</span>
        </span>
        <span class="mono muted small comp-args">{argsPreview(props.input)}</span>
        {c?.error && <span class="error-text small">{c.error}</span>}
      </span>
      <span class="comp-state small">{label[state]}</span>
    </li>
  );
}

/**
 * Cancel in two steps: first what it will do (the compensations newest first, the resources to
 * release, anything uncertain), then, once confirmed, each compensation's progress live.
 */
export function CancelDialog(props: { run: RunView; timeline: Timeline; initialReason: string; onClose: () => void; onConfirm: (reason: string) => Promise<boolean> }) {
  const { client } = useApp();
  const { run } = props;
  const startedCancelling = run.status === "cancelling" || run.status === "cancelled";
  const [phase, setPhase] = useState<Phase>(startedCancelling ? "cancelling" : "preview");
  const [preview, setPreview] = useState<CancelPreviewResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [reason, setReason] = useState(props.initialReason);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    client.cancelPreview(run.id).then(setPreview, (e: unknown) => setError(errorMessage(e)));
  }, [client, run.id]);

  // The preview, plus whatever completed since it was read (the run view's pending list is live),
  // plus (opened during or after a cancel) the effects the journal shows being undone.
  const bySeq = new Map<number, { callSeq: number; tool: string; input: Json }>();
  for (const c of preview?.compensations ?? []) bySeq.set(c.callSeq, c);
  for (const c of run.pendingCompensations) bySeq.set(c.callSeq, c);
  for (const c of props.timeline.calls.values()) if (c.compensation && !bySeq.has(c.callSeq)) bySeq.set(c.callSeq, { callSeq: c.callSeq, tool: c.name, input: c.input ?? null });
  const rows = [...bySeq.values()].sort((a, b) => b.callSeq - a.callSeq);
  const done = run.status === "cancelled";
  const failures = rows.filter((r) => props.timeline.calls.get(r.callSeq)?.compensation?.state === "failed").length;

  const confirm = async () => {
    setBusy(true);
    const ok = await props.onConfirm(reason);
    setBusy(false);
    if (ok) setPhase("cancelling");
  };

  return (
    <Dialog title={phase === "preview" ? "Cancel this run?" : done ? "Run cancelled" : "Cancelling…"} onClose={props.onClose} tone="danger" busy={busy} testId="cancel-dialog" wide>
      <div class="dialog-body stack">
        {phase === "preview" && (
          <p>
            The run stops at once (in-flight calls are aborted), then its effects are undone <strong>newest first</strong> and its resources released. This cannot be resumed.
          </p>
        )}
        {phase === "cancelling" && !done && (
          <p class="row">
            <Spinner /> Undoing effects and releasing resources. Progress appears as it happens.
          </p>
        )}
        {done && (
          <p data-testid="cancel-done" class={failures ? "error-text" : "success-text"}>
            {failures ? `${failures} compensation${failures === 1 ? "" : "s"} failed: a person needs to look at ${failures === 1 ? "it" : "them"}.` : "Everything listed was undone."}
          </p>
        )}
        {error && <p class="error-text">{error}</p>}
        {!preview && !error && <p class="muted">Loading what a cancel would do…</p>}
        {preview && (
          <>
            <div>
              <div class="label">Compensations{rows.length ? ` (${rows.length}, newest first)` : ""}</div>
              {rows.length === 0 ? (
                <p class="muted small">Nothing to undo: no completed effect of this run declares a compensation.</p>
              ) : (
                <ol class="comps" data-testid="compensations">
                  {rows.map((r) => (
                    <CompensationRow key={r.callSeq} callSeq={r.callSeq} tool={r.tool} input={r.input} call={props.timeline.calls.get(r.callSeq)} phase={phase} cancelled={done} />
                  ))}
                </ol>
              )}
            </div>
            <div>
              <div class="label">Resources to release</div>
              {preview.resources.length ? (
                <ul class="plain-list">
                  {preview.resources.map((r) => (
                    <li key={r}>
                      <code>{r}</code>
                      {done && run.report && (run.report.released.includes(r) ? <span class="success-text small"> released</span> : run.report.releaseFailed.some((f) => f.name === r) ? <span class="error-text small"> release failed</span> : null)}
                    </li>
                  ))}
                </ul>
              ) : (
                <p class="muted small">None held.</p>
              )}
            </div>
            {preview.uncertain.length > 0 && (
              <div class="panel panel-warn small">
                <Icon name="alert" />
                <div>
                  Uncertain, not undone automatically:{" "}
                  {preview.uncertain.map((u) => (
                    <code key={u.callSeq}>
                      {u.tool} #{u.callSeq}
                    </code>
                  ))}
                  . It will be flagged in the report for a person.
                </div>
              </div>
            )}
          </>
        )}
        {phase === "preview" ? (
          <>
            <label class="field">
              <span class="label">Reason (kept in the audit trail)</span>
              <input class="input" value={reason} maxLength={2000} onInput={(e) => setReason((e.target as HTMLInputElement).value)} placeholder="e.g. wrong question" data-testid="cancel-reason" />
            </label>
            <div class="row-end">
              <button class="btn btn-ghost" onClick={props.onClose} disabled={busy}>
                Keep the run
              </button>
              <button class="btn btn-danger" onClick={() => void confirm()} disabled={busy || !preview} data-testid="confirm-cancel">
                {busy ? "Cancelling…" : rows.length ? `Cancel and undo ${rows.length}` : "Cancel the run"}
              </button>
            </div>
          </>
        ) : (
          <div class="row-end">
            <button class="btn" onClick={props.onClose}>
              Close
            </button>
          </div>
        )}
      </div>
    </Dialog>
  );
}
