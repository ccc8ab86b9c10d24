import { useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { ApprovalRequest, Json, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { formatDuration } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { JsonView } from "../ui/json-view.js";
import { useNow } from "../ui/use-now.js";

type Mode = "idle" | "reject" | "edit";

/** One call waiting for approval: its arguments, and Approve / Reject (with a note) / Edit. */
function PendingCall(props: { run: RunView; request: ApprovalRequest; onRun(run: RunView): void }) {
  const { client, identity, toast } = useApp();
  const { request } = props;
  const [mode, setMode] = useState<Mode>("idle");
  const [note, setNote] = useState("");
  const [edited, setEdited] = useState(() => JSON.stringify(request.input, null, 2));
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const now = useNow(1_000);
  const allowed = roleAllows(identity.role, "operator");
  const decision = request.decision;

  const decide = async (action: () => Promise<{ run: RunView }>, what: string) => {
    setBusy(true);
    setProblem(null);
    try {
      props.onRun((await action()).run);
      setMode("idle");
      toast(`${what} ${request.tool} (call #${request.callSeq})`, "success");
    } catch (error) {
      setProblem(errorMessage(error));
    } finally {
      setBusy(false);
    }
  };
  const approveEdited = () => {
    let input: Json;
    try {
      input = JSON.parse(edited) as Json;
    } catch (error) {
      setProblem(`Not JSON: ${(error as Error).message}`);
      return;
    }
    void decide(() => client.approve(props.run.id, { callSeq: request.callSeq, input, note: note.trim() || undefined }), "Approved with edited arguments:");
  };

  return (
    <div class="approval stack-sm" data-testid={`approval-${request.callSeq}`}>
      <div class="row">
        <strong>
          <code>{request.tool}</code> <span class="muted">(call #{request.callSeq})</span>
        </strong>
        {decision ? (
          <span class={decision.decision === "approved" ? "report-ok" : "report-bad"} data-testid="approval-decision">
            {decision.decision} by {decision.actor}
            {decision.note ? `: ${decision.note}` : ""}
          </span>
        ) : (
          request.expiresAt !== null && (
            <span class="muted small">
              {request.expiresAt > now ? `${formatDuration(request.expiresAt - now)} left` : "deadline passed"}, then {request.onTimeout === "reject" ? "rejected" : "keeps waiting"}
            </span>
          )
        )}
      </div>
      <JsonView value={decision?.input ?? request.input} maxHeight={200} />
      {!decision && (
        <div class="row">
          <button class="btn btn-primary" disabled={!allowed || busy} onClick={() => void decide(() => client.approve(props.run.id, { callSeq: request.callSeq }), "Approved")} data-testid="approve">
            <Icon name="check" /> Approve
          </button>
          <button class="btn btn-danger" disabled={!allowed || busy} onClick={() => setMode(mode === "reject" ? "idle" : "reject")} data-testid="reject">
            Reject…
          </button>
          <button class="btn" disabled={!allowed || busy} onClick={() => setMode(mode === "edit" ? "idle" : "edit")} data-testid="edit">
            Edit…
          </button>
          {!allowed && <span class="muted small">An operator decides.</span>}
        </div>
      )}
      {mode === "edit" && (
        <div class="stack-sm">
          <label class="field">
            <span class="label">Arguments to run the call with (JSON)</span>
            <textarea class="input mono" rows={5} value={edited} onInput={(e) => setEdited((e.target as HTMLTextAreaElement).value)} data-testid="edit-input" />
          </label>
          <div class="row">
            <button class="btn btn-primary" disabled={busy} onClick={approveEdited} data-testid="approve-edited">
              Approve with these arguments
            </button>
          </div>
        </div>
      )}
      {mode === "reject" && (
        <div class="stack-sm">
          <label class="field">
            <span class="label">Why (the agent reads this as the call's result)</span>
            <textarea class="input" rows={2} value={note} onInput={(e) => setNote((e.target as HTMLTextAreaElement).value)} data-testid="reject-note" />
          </label>
          <div class="row">
            <button
              class="btn btn-danger"
              disabled={busy || !note.trim()}
              onClick={() => void decide(() => client.reject(props.run.id, { callSeq: request.callSeq, note: note.trim() }), "Rejected")}
              data-testid="reject-confirm"
            >
              Reject the call
            </button>
          </div>
        </div>
      )}
      {problem && <p class="error-text">{problem}</p>}
    </div>
  );
}

/** A run paused before calls that need a person's approval: each call, decided one by one. */
export function ApprovalPanel(props: { run: RunView; onRun(run: RunView): void }) {
  const requests = props.run.approvals ?? [];
  const waiting = requests.filter((r) => !r.decision).length;
  return (
    <div class="panel panel-warn" data-testid="approval-panel">
      <Icon name="shield" />
      <div class="stack grow">
        <div>
          <strong>{waiting === 1 ? "A call waits for your approval." : `${waiting} calls wait for your approval.`}</strong>
          <div class="muted small">Nothing runs until each is decided. Approve runs the call once; reject gives the agent your note as the call's result; edit changes the arguments before approving.</div>
        </div>
        {requests.map((request) => (
          <PendingCall key={request.callSeq} run={props.run} request={request} onRun={props.onRun} />
        ))}
      </div>
    </div>
  );
}
