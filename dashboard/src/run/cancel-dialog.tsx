import { useEffect, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { CancelPreviewResponse, Json, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { Dialog } from "../ui/dialog.js";
import { Icon, Spinner } from "../ui/icons.js";
import { Link } from "../ui/router.js";
import type { CallView, Timeline } from "./timeline-model.js";

type Phase = "preview" | "cancelling";
type InheritedChoice = "compensate" | "keep";

function argsPreview(input: Json): string {
  const text = JSON.stringify(input);
  return text.length > 90 ? `${text.slice(0, 90)}…` : text;
}

function CompensationRow(props: { callSeq: number; tool: string; input: Json; call: CallView | undefined; phase: Phase; cancelled: boolean; kept: boolean }) {
  const c = props.call?.compensation;
  let state: "pending" | "compensating" | "compensated" | "failed" | "retrying" | "kept" = props.kept ? "kept" : "pending";
  if (c) state = c.state === "compensated" ? "compensated" : c.state === "failed" ? "failed" : c.retrying ? "retrying" : "compensating";
  const label: Record<typeof state, string> = {
    kept: props.phase === "preview" ? "kept for the forks" : "kept (a fork relies on it)",
    pending: props.phase === "preview" ? "will be undone" : props.cancelled ? "not undone" : "waiting",
    compensating: `undoing… (attempt ${c?.attempts ?? 1})`,
    retrying: `attempt ${c?.attempts ?? 1} failed, retrying`,
    compensated: "undone",
    failed: "undo failed",
  };
  return (
    <li class={`comp comp-${state}`} data-testid="compensation" data-call-seq={props.callSeq} data-state={state}>
      <span class="comp-icon">
        {state === "compensated" || state === "kept" ? <Icon name="check" /> : state === "failed" ? <Icon name="alert" /> : state === "compensating" || state === "retrying" ? <Spinner /> : <Icon name="undo" />}
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
export function CancelDialog(props: { run: RunView; timeline: Timeline; initialReason: string; onClose: () => void; onConfirm: (reason: string, inherited?: InheritedChoice) => Promise<boolean> }) {
  const { client } = useApp();
  const { run } = props;
  const startedCancelling = run.status === "cancelling" || run.status === "cancelled";
  const [phase, setPhase] = useState<Phase>(startedCancelling ? "cancelling" : "preview");
  const [preview, setPreview] = useState<CancelPreviewResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [reason, setReason] = useState(props.initialReason);
  const [busy, setBusy] = useState(false);
  // Live forks inherited effects a cancel would undo: the person chooses, nothing is preselected.
  const [inherited, setInherited] = useState<InheritedChoice | null>(null);

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
  // Done once the journal shown here reached the end too: the run's record (from the runs feed)
  // can say cancelled before this run's stream has brought the compensations' last entries.
  const done = run.status === "cancelled" && props.timeline.items.some((item) => item.type === "marker" && item.marker.status === "cancelled");
  const mustChoose = (preview?.inherited.length ?? 0) > 0;
  const keptSeqs = new Set<number>([...(run.report?.kept ?? []).map((k) => k.callSeq), ...(inherited === "keep" ? (preview?.inherited ?? []).map((e) => e.callSeq) : [])]);
  const undoCount = rows.filter((r) => !keptSeqs.has(r.callSeq)).length;
  const failures = rows.filter((r) => props.timeline.calls.get(r.callSeq)?.compensation?.state === "failed").length;

  const confirm = async () => {
    setBusy(true);
    const ok = await props.onConfirm(reason, inherited ?? undefined);
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
            {failures ? `${failures} compensation${failures === 1 ? "" : "s"} failed: a person needs to look at ${failures === 1 ? "it" : "them"}.` : run.report?.kept?.length ? `Everything listed was undone, except ${run.report.kept.length} kept for the forks.` : "Everything listed was undone."}
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
                    <CompensationRow key={r.callSeq} callSeq={r.callSeq} tool={r.tool} input={r.input} call={props.timeline.calls.get(r.callSeq)} phase={phase} cancelled={done} kept={keptSeqs.has(r.callSeq)} />
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
            {mustChoose && phase === "preview" && (
              <div class="panel panel-warn small stack-sm" data-testid="inherited-effects">
                <Icon name="alert" />
                <div class="stack-sm grow">
                  <div>
                    {preview.forks.length === 1 ? "A live fork inherited" : `${preview.forks.length} live forks inherited`} effects this cancel would undo, and may still rely on them:
                    <ul class="plain-list">
                      {preview.forks.map((f) => (
                        <li key={f.runId} data-testid="inheriting-fork">
                          <Link href={`/runs/${f.runId}`} class="mono">
                            {f.runId}
                          </Link>{" "}
                          <span class="muted">({f.status}, forked from step {f.fromStep})</span>:{" "}
                          {preview.inherited
                            .filter((e) => e.forks.includes(f.runId))
                            .map((e) => (
                              <code key={e.callSeq}>
                                {e.tool} #{e.callSeq}
                              </code>
                            ))}
                        </li>
                      ))}
                    </ul>
                  </div>
                  <div class="agent-picker" role="radiogroup" aria-label="Effects the forks inherited">
                    <label class={`agent-option${inherited === "keep" ? " selected" : ""}`}>
                      <input type="radio" name="inherited" value="keep" checked={inherited === "keep"} onChange={() => setInherited("keep")} data-testid="inherited-keep" />
                      <span class="agent-option-name">Keep them for the forks</span>
                      <span class="agent-option-desc">Undo only the other effects; these are listed in the report as kept.</span>
                    </label>
                    <label class={`agent-option${inherited === "compensate" ? " selected" : ""}`}>
                      <input type="radio" name="inherited" value="compensate" checked={inherited === "compensate"} onChange={() => setInherited("compensate")} data-testid="inherited-compensate" />
                      <span class="agent-option-name">Undo them anyway</span>
                      <span class="agent-option-desc">Every effect is undone, including what the forks inherited.</span>
                    </label>
                  </div>
                </div>
              </div>
            )}
            {phase === "preview" && preview.uncertain.length > 0 && (
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
              <button class="btn btn-danger" onClick={() => void confirm()} disabled={busy || !preview || (mustChoose && inherited === null)} title={mustChoose && inherited === null ? "Choose what to do with the effects the forks inherited" : undefined} data-testid="confirm-cancel">
                {busy ? "Cancelling…" : undoCount ? `Cancel and undo ${undoCount}` : "Cancel the run"}
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
