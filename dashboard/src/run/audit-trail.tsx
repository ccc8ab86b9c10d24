import { clockTime, fullTime } from "../ui/format.js";
import type { AuditEntry } from "./timeline-model.js";

function outcomeClass(outcome: string | null): string {
  if (!outcome) return "";
  if (outcome.startsWith("refused")) return "outcome-bad";
  if (outcome === "already_holds") return "muted";
  return "outcome-ok";
}

/** Who did what to this run, when and why: every control command and human edit, newest first. */
export function AuditTrail(props: { audit: readonly AuditEntry[] }) {
  const rows = [...props.audit].reverse();
  return (
    <section class="card" data-testid="audit-trail">
      <header class="card-head">
        <h2>Audit trail</h2>
        <span class="muted small">{rows.length}</span>
      </header>
      {rows.length === 0 ? (
        <p class="muted pad small">No one has paused, resumed, cancelled or edited this run.</p>
      ) : (
        <ul class="audit">
          {rows.map((row) => (
            <li key={row.seq} data-action={row.action}>
              <div class="audit-head">
                <strong class="audit-action">{row.action}</strong>
                <span>by {row.actor}</span>
                <span class="mono muted audit-time" title={fullTime(row.at)}>
                  {clockTime(row.at)}
                </span>
              </div>
              {row.reason && <div class="audit-reason">“{row.reason}”</div>}
              <div class="small">
                {row.outcome && <span class={outcomeClass(row.outcome)}>{row.outcome.replace(/_/g, " ")}</span>}
                {row.appliedAt !== undefined && <span class="outcome-ok"> → applied {clockTime(row.appliedAt)}</span>}
                {row.detail && <span class="muted clamp"> · {row.detail}</span>}
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
