import { useMemo, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { formatAge } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { Link, navigate } from "../ui/router.js";
import { StatusBadge } from "../ui/status-badge.js";
import { useHotkeys } from "../ui/use-hotkeys.js";
import { useNow } from "../ui/use-now.js";
import { AuditTrail } from "./audit-trail.js";
import { BudgetMeter } from "./budget-meter.js";
import { CancelDialog } from "./cancel-dialog.js";
import { ControlBar } from "./control-bar.js";
import { LiveOutput } from "./live-output.js";
import { PendingCompensations } from "./pending-compensations.js";
import { RunDetails } from "./run-details.js";
import { StatePanel } from "./state-panel.js";
import { StatusPanels } from "./status-panels.js";
import { buildTimeline } from "./timeline-model.js";
import { TimelineView } from "./timeline-view.js";
import { canApply } from "./transitions.js";
import { useRunControls } from "./use-run-controls.js";
import { useRunData } from "./use-run-data.js";

export function RunPage(props: { id: string }) {
  const { client, identity, toast } = useApp();
  const data = useRunData(props.id);
  const timeline = useMemo(() => buildTimeline(data.entries), [data.entries]);
  const controls = useRunControls(props.id, data.setRun);
  const [cancelOpen, setCancelOpen] = useState(false);
  const [forking, setForking] = useState(false);
  const now = useNow(10_000);
  const operator = roleAllows(identity.role, "operator");
  const run = data.run?.run;

  useHotkeys(
    {
      p: () => run && operator && canApply("pause", run.status) && void controls.pause(),
      r: () => run && operator && canApply("resume", run.status) && !run.inflight?.uncertain && !run.approvals?.some((a) => !a.decision) && void controls.resume(),
      c: () => run && operator && canApply("cancel", run.status) && setCancelOpen(true),
    },
    run !== undefined,
  );

  if (data.notFound)
    return (
      <div class="card empty">
        <h2>No run {props.id}</h2>
        <Link href="/">Back to the runs</Link>
      </div>
    );
  if (!data.run || !run) return <p class="muted">Loading the run…</p>;

  const fork = async (fromStep: number) => {
    setForking(true);
    try {
      const forked = await client.fork(run.id, fromStep);
      toast(`Forked ${forked.id} from step ${fromStep}`, "success");
      navigate(`/runs/${forked.id}`);
    } catch (error) {
      toast(`Fork refused: ${errorMessage(error)}`, "danger");
    } finally {
      setForking(false);
    }
  };

  return (
    <section class="stack-lg run-page" data-run-id={run.id}>
      <div class="crumbs">
        <Link href="/">Runs</Link>
        <Icon name="chevron" />
        <span class="mono">{run.id}</span>
      </div>
      <div class="run-head">
        <div class="run-title">
          <h1>{run.agent}</h1>
          <StatusBadge status={run.status} large />
          <span class="muted small">
            started {formatAge(run.createdAt, now)} by {run.owner}
          </span>
          {data.stream !== "live" && <span class="muted small">· reconnecting to the event stream…</span>}
        </div>
        <ControlBar run={run} controls={controls} onCancel={() => setCancelOpen(true)} />
      </div>
      <StatusPanels received={data.run} controls={controls} onRefresh={async () => {
          await Promise.all([data.refreshRun(), data.refreshState()]);
        }} onOpenCancel={() => setCancelOpen(true)} onRun={data.setRun} />
      <div class="run-grid">
        <div class="run-main stack">
          <LiveOutput run={run} timeline={timeline} texts={data.texts} state={data.state} />
          <StatePanel
            run={run}
            state={data.state}
            error={data.stateError}
            onChanged={(next) => {
              data.setRun(next);
              void data.refreshState();
            }}
          />
          <TimelineView run={run} timeline={timeline} texts={data.texts} state={data.state} canFork={operator} onFork={(step) => void fork(step)} forking={forking} />
        </div>
        <aside class="run-side stack">
          <BudgetMeter received={data.run} />
          <PendingCompensations run={run} />
          <AuditTrail audit={timeline.audit} />
          <RunDetails received={data.run} />
        </aside>
      </div>
      {cancelOpen && <CancelDialog run={run} timeline={timeline} initialReason={controls.reason} onClose={() => setCancelOpen(false)} onConfirm={controls.cancel} />}
    </section>
  );
}
