import { useEffect, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { AgentInfo, HaltRecord } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { Dialog } from "../ui/dialog.js";
import { formatAge, fullTime, shortId } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { Link } from "../ui/router.js";
import { StatusBadge } from "../ui/status-badge.js";
import { useNow } from "../ui/use-now.js";

function scopeLabel(scope: string): string {
  return scope === "*" ? "All runs" : `Agent ${scope.replace(/^agent:/, "")}`;
}

function HaltConfirm(props: { scope: string; reason: string; affected: number; onClose: () => void; onConfirm: () => Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [typed, setTyped] = useState("");
  return (
    <Dialog title="Throw the halt switch?" onClose={props.onClose} tone="danger" busy={busy} testId="halt-confirm">
      <div class="dialog-body stack">
        <p>
          <strong>{props.scope === "" ? "Every run" : `Every run of ${props.scope}`}</strong> stops now: {props.affected} active {props.affected === 1 ? "run" : "runs"} will be halted, every in-flight call aborted at once, and no new run starts until the halt is lifted.
        </p>
        <p class="small muted">Unlike a cancel, no compensation runs and the state is kept. Lifting the halt leaves the runs paused.</p>
        <p class="small">
          Reason: <em>“{props.reason}”</em>
        </p>
        <label class="field">
          <span class="label">Type HALT to confirm</span>
          <input class="input mono" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} autofocus data-testid="halt-typed" />
        </label>
        <div class="row-end">
          <button class="btn btn-ghost" onClick={props.onClose} disabled={busy}>
            Back
          </button>
          <button
            class="btn btn-halt"
            disabled={busy || typed.trim().toUpperCase() !== "HALT"}
            onClick={async () => {
              setBusy(true);
              await props.onConfirm();
              setBusy(false);
            }}
            data-testid="halt-confirm-button"
          >
            {busy ? "Halting…" : "Halt now"}
          </button>
        </div>
      </div>
    </Dialog>
  );
}

/** The kill switch (admin only), the halts in force, and the runs they hold. */
export function OperatorPage() {
  const { client, identity, halts, refreshHalts, toast, feed } = useApp();
  const admin = roleAllows(identity.role, "admin");
  const now = useNow(10_000);
  const [agents, setAgents] = useState<AgentInfo[]>([]);
  const [agent, setAgent] = useState("");
  const [reason, setReason] = useState("");
  const [confirming, setConfirming] = useState(false);
  const [lifting, setLifting] = useState<HaltRecord | null>(null);
  const [liftBusy, setLiftBusy] = useState(false);

  useEffect(() => {
    refreshHalts();
    client.agents().then(setAgents, () => undefined);
  }, [client, refreshHalts]);

  const active = feed.all().filter((r) => ["queued", "running", "pausing", "paused", "cancelling"].includes(r.status) && (!agent || r.agent === agent)).length;

  return (
    <section class="stack-lg">
      <div class="page-head">
        <div>
          <h1>Operator</h1>
          <p class="muted">The emergency stop for every run on this server. To stop a single run, use its Cancel.</p>
        </div>
      </div>

      <section class="card halt-card" data-testid="halt-card">
        <header class="card-head">
          <h2>
            <Icon name="shield" /> Halt switch
          </h2>
          {!admin && <span class="muted small">needs the admin role (you are {identity.role})</span>}
        </header>
        <div class="pad stack">
          <p class="small">Aborts every in-flight call at once and starts nothing new. No compensation runs; state is kept. Runs show <code>halted</code> until the halt is lifted, then they are paused.</p>
          <div class="halt-form">
            <label class="field">
              <span class="label">Scope</span>
              <select class="input" value={agent} onChange={(e) => setAgent((e.target as HTMLSelectElement).value)} disabled={!admin} data-testid="halt-scope">
                <option value="">All runs</option>
                {agents.map((a) => (
                  <option key={a.name} value={a.name}>
                    Agent {a.name}
                  </option>
                ))}
              </select>
            </label>
            <label class="field grow">
              <span class="label">Reason (required)</span>
              <input class="input" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} placeholder="e.g. provider incident: runaway spend" disabled={!admin} maxLength={2000} data-testid="halt-reason" />
            </label>
            <button class="btn btn-halt" disabled={!admin || !reason.trim()} onClick={() => setConfirming(true)} data-testid="halt-button">
              <Icon name="shield" /> Halt…
            </button>
          </div>
        </div>
      </section>

      <section class="card" data-testid="halts">
        <header class="card-head">
          <h2>Halts in force</h2>
          <span class="muted small">{halts?.halts.length ?? 0}</span>
        </header>
        {!halts || halts.halts.length === 0 ? (
          <p class="muted pad small">None. Runs start and continue normally.</p>
        ) : (
          <ul class="halt-list">
            {halts.halts.map((h) => (
              <li key={h.scope} data-scope={h.scope}>
                <div class="grow">
                  <strong>{scopeLabel(h.scope)}</strong>
                  <div class="small">
                    by {h.actor} · <span title={fullTime(h.at)}>{formatAge(h.at, now)}</span>
                    {h.reason ? ` · “${h.reason}”` : ""}
                  </div>
                </div>
                <button class="btn" disabled={!admin} onClick={() => setLifting(h)} data-testid="lift-halt">
                  Lift halt
                </button>
              </li>
            ))}
          </ul>
        )}
      </section>

      <section class="card" data-testid="halted-runs">
        <header class="card-head">
          <h2>Halted runs</h2>
          <span class="muted small">{halts?.runs.length ?? 0}</span>
        </header>
        {!halts || halts.runs.length === 0 ? (
          <p class="muted pad small">No run is halted.</p>
        ) : (
          <ul class="plain-list halted-runs">
            {halts.runs.map((r) => (
              <li key={r.id}>
                <StatusBadge status={r.status} />
                <Link href={`/runs/${r.id}`} class="mono">
                  {shortId(r.id)}
                </Link>
                <span>{r.agent}</span>
                <span class="muted small">step {r.step}</span>
              </li>
            ))}
          </ul>
        )}
      </section>

      {confirming && (
        <HaltConfirm
          scope={agent}
          reason={reason.trim()}
          affected={active}
          onClose={() => setConfirming(false)}
          onConfirm={async () => {
            try {
              const result = await client.halt(reason.trim(), agent || undefined);
              toast(`Halted ${result.halted.length} run${result.halted.length === 1 ? "" : "s"} (${scopeLabel(result.scope)})`, "danger");
              // A run whose record is damaged cannot be halted; every other run is, and the person is told which.
              if (result.failed.length) toast(`Could not halt ${result.failed.map((f) => `${f.runId} (${f.code}: ${f.message})`).join("; ")}`, "danger");
              setReason("");
              setConfirming(false);
            } catch (error) {
              toast(`Halt refused: ${errorMessage(error)}`, "danger");
            }
            refreshHalts();
          }}
        />
      )}
      {lifting && (
        <Dialog title={`Lift the halt on ${scopeLabel(lifting.scope).toLowerCase()}?`} onClose={() => setLifting(null)} busy={liftBusy} testId="lift-confirm">
          <div class="dialog-body stack">
            <p>New runs can start again. Halted runs in this scope become <strong>paused</strong>: each one's owner decides whether to resume or cancel it.</p>
            <div class="row-end">
              <button class="btn btn-ghost" onClick={() => setLifting(null)} disabled={liftBusy}>
                Keep the halt
              </button>
              <button
                class="btn btn-primary"
                disabled={liftBusy}
                onClick={async () => {
                  setLiftBusy(true);
                  try {
                    const result = await client.unhalt(lifting.scope === "*" ? undefined : lifting.scope.replace(/^agent:/, ""));
                    toast(`Halt lifted: ${result.paused.length} run${result.paused.length === 1 ? "" : "s"} now paused${result.cancelling.length ? `, ${result.cancelling.length} cancelling again` : ""}`, "success");
                    if (result.failed.length) toast(`Still halted: ${result.failed.map((f) => `${f.runId} (${f.code}: ${f.message})`).join("; ")}`, "danger");
                    setLifting(null);
                  } catch (error) {
                    toast(`Could not lift the halt: ${errorMessage(error)}`, "danger");
                  }
                  setLiftBusy(false);
                  refreshHalts();
                }}
                data-testid="lift-confirm-button"
              >
                Lift halt
              </button>
            </div>
          </div>
        </Dialog>
      )}
    </section>
  );
}
