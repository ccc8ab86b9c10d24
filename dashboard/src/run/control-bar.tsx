import type { RunView } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { Icon } from "../ui/icons.js";
import { Kbd } from "../ui/kbd.js";
import { canApply } from "./transitions.js";
import type { RunControls } from "./use-run-controls.js";

function why(command: string, status: string, allowed: boolean, role: string): string {
  if (!allowed) return `Your token has the ${role} role: controlling runs needs operator`;
  return `Cannot ${command} a ${status} run`;
}

/** Pause, Resume and Cancel: always on screen, enabled only when the command is legal now and the role allows it. */
export function ControlBar(props: { run: RunView; controls: RunControls; onCancel: () => void }) {
  const { identity } = useApp();
  const { run, controls } = props;
  const allowed = roleAllows(identity.role, "operator");
  const pauseOk = allowed && canApply("pause", run.status);
  const awaitingApproval = run.approvals?.some((a) => !a.decision) ?? false;
  const resumeOk = allowed && canApply("resume", run.status) && !run.inflight?.uncertain && !awaitingApproval;
  const cancelOk = allowed && canApply("cancel", run.status);
  const anyOk = pauseOk || resumeOk || cancelOk;
  return (
    <div class="control-bar" data-testid="control-bar">
      <div class="control-buttons">
        <button class="btn btn-control" onClick={() => void controls.pause()} disabled={!pauseOk || controls.busy !== null} title={pauseOk ? "Pause: no new call starts from now" : why("pause", run.status, allowed, identity.role)} data-testid="pause">
          <Icon name="pause" /> {controls.busy === "pause" ? "Pausing…" : "Pause"} <Kbd>P</Kbd>
        </button>
        <button
          class="btn btn-control btn-resume"
          onClick={() => void controls.resume()}
          disabled={!resumeOk || controls.busy !== null}
          title={
            resumeOk
              ? "Resume from the latest snapshot"
              : run.inflight?.uncertain && allowed
                ? "Decide about the uncertain effect first"
                : awaitingApproval && allowed
                  ? "Approve or reject the calls waiting below; the run continues once all are decided"
                  : why("resume", run.status, allowed, identity.role)
          }
          data-testid="resume"
        >
          <Icon name="play" /> {controls.busy === "resume" ? "Resuming…" : "Resume"} <Kbd>R</Kbd>
        </button>
        <button class="btn btn-control btn-cancel" onClick={props.onCancel} disabled={!cancelOk || controls.busy !== null} title={cancelOk ? "Cancel: stop and undo the run's effects" : why("cancel", run.status, allowed, identity.role)} data-testid="cancel">
          <Icon name="stop" /> Cancel… <Kbd>C</Kbd>
        </button>
      </div>
      <label class="reason-field">
        <span class="sr-only">Reason</span>
        <input
          class="input"
          placeholder={anyOk ? "Reason (optional, kept in the audit trail)" : allowed ? "No command applies now" : "Read only (viewer)"}
          value={controls.reason}
          disabled={!anyOk}
          maxLength={2000}
          onInput={(e) => controls.setReason((e.target as HTMLInputElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && pauseOk) void controls.pause();
          }}
          data-testid="reason"
        />
      </label>
    </div>
  );
}
