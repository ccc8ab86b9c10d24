import { decideApproval, expireApprovals, nextApprovalDeadline, type ApprovalDecisionInput, type StaleCheck } from "./approval.js";
import type { ControlHost } from "./control-command.js";
import type { EngineContext } from "./engine-context.js";
import { staleReasons } from "./stale-check.js";
import type { ApprovalRequest, RunRecord } from "./store.js";

/** The resume's stale check, for a run that continues once its approvals are decided. */
function approvalStaleCheck(ctx: EngineContext): StaleCheck {
  return async (run, now) => {
    const agent = ctx.agents.get(run.agent);
    return agent ? staleReasons(ctx, run, agent, now) : undefined;
  };
}

/** A run its decisions set running again is claimed here, if this process executes runs. */
function decided<T extends { run: RunRecord }>(host: ControlHost, outcome: T): T {
  if (outcome.run.status === "running" && host.claims()) host.claimSoon(outcome.run);
  return outcome;
}

/** Approves a call waiting for approval (every call waiting without `callSeq`). */
export async function approveCall(host: ControlHost, runId: string, options: ApprovalDecisionInput): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
  return decided(host, await decideApproval(host.ctx, runId, "approved", options, approvalStaleCheck(host.ctx)));
}

/** Rejects a call waiting for approval (every call waiting without `callSeq`): the agent receives `note` as the call's result. */
export async function rejectCall(host: ControlHost, runId: string, options: ApprovalDecisionInput & { note: string }): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
  return decided(host, await decideApproval(host.ctx, runId, "rejected", options, approvalStaleCheck(host.ctx)));
}

/** Applies the approval deadlines of one run that have passed; the run after. */
export async function expireRunApprovals(host: ControlHost, runId: string): Promise<RunRecord | undefined> {
  const after = await expireApprovals(host.ctx, runId, approvalStaleCheck(host.ctx));
  return after && decided(host, { run: after }).run;
}

/** Applies every approval deadline that has passed, reading every paused run. Returns the runs it changed. */
export async function expireAllApprovals(host: ControlHost): Promise<RunRecord[]> {
  const now = host.ctx.clock.now();
  const changed: RunRecord[] = [];
  for (const run of await host.ctx.store.listRuns({ status: ["paused", "pausing", "halted"], limit: 100_000 })) {
    const deadline = nextApprovalDeadline(run);
    if (deadline === undefined || deadline > now) continue;
    const after = await expireRunApprovals(host, run.id);
    if (after && after.version !== run.version) changed.push(after);
  }
  return changed;
}
