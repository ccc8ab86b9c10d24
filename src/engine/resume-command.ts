import { undecided } from "./approval.js";
import { trippedBudget, type Budgets } from "./budgets.js";
import { applyControl, newCommand, type ControlHost, type ControlOptions } from "./control-command.js";
import { editState } from "./edit-command.js";
import {
  AlreadyDecidedError,
  ApprovalPendingError,
  BudgetExceededError,
  IllegalTransitionError,
  InvalidInputError,
  RunHaltedError,
  StaleSnapshotError,
  UncertainEffectError,
  VersionMismatchError,
} from "./errors.js";
import type { Json } from "./json.js";
import { restoreState, verifyStoredState } from "./snapshot.js";
import { cloneState } from "./state.js";
import { staleReasons } from "./stale-check.js";
import { statusEntry } from "./status-entry.js";
import type { InflightCall, JournalInput, RunPatch, RunRecord } from "./store.js";
import { describeRefresh } from "./stale-check.js";
import { versionCompatible } from "./version-pin.js";

export interface ResumeOptions extends ControlOptions {
  message?: string;
  patch?: unknown;
  force?: boolean;
  /**
   * A person's decision on an uncertain effect: `retry` it, `skip` it, or say it is `done`, which
   * needs the result it had (`result`) or an explicit `noResult: true`. A decision is final.
   */
  resolve?: "retry" | "skip" | "done" | { action: "retry" | "skip" | "done"; result?: Json; noResult?: boolean };
  budgets?: Budgets;
}

/**
 * The resume command: a paused run becomes `running` (with the edits it carries, after the stale
 * check) and a worker claims it; refused while a call is uncertain, approvals wait, or a budget it
 * still exceeds paused it.
 */
export async function resumeRun(host: ControlHost, runId: string, options: ResumeOptions): Promise<RunRecord> {
  const ctx = host.ctx;
  // The HTTP API's shorthand too: `resolve: "retry"` is `{ action: "retry" }`.
  const resolve = typeof options.resolve === "string" ? { action: options.resolve, result: undefined, noResult: undefined } : options.resolve;
  const command = newCommand(ctx, "resume", runId, options, {
    ...(options.force ? { force: true } : {}),
    ...(options.message !== undefined ? { message: true } : {}),
    ...(options.patch !== undefined ? { patch: true } : {}),
    ...(resolve ? { resolve: resolve.action } : {}),
  });
  if (resolve?.action === "done" && resolve.result === undefined && !resolve.noResult) {
    throw new InvalidInputError(`resolving call as done needs the result the effect had (result), or an explicit noResult: true; the agent continues with it as the call's result`);
  }
  // Whether the write that was applied also claimed the run for this process; whether any write tried to.
  let claimedInline = false;
  let leaseTaken = false;
  const settle = (run?: RunRecord) => {
    if (leaseTaken) host.inlineClaimSettled(runId, run);
  };
  const run = await applyControl(host, runId, command, async (current, now) => {
    claimedInline = false;
    const decided = current.inflight?.resolution;
    if (resolve && decided && current.inflight) return { refuse: new AlreadyDecidedError(runId, current.inflight.callSeq, decided.action, decided.actor) };
    if (resolve && !current.inflight?.uncertain) {
      // Decided, and the decision already carried out: the journal's recent entries say so.
      const recent = await ctx.store.readJournal(runId, { afterSeq: Math.max(0, current.journalSeq - 200), limit: 200 });
      const resolved = recent.findLast((e) => e.type === "call.resolved");
      if (resolved) return { refuse: new AlreadyDecidedError(runId, resolved.callSeq ?? 0, String(resolved.data.decision), String(resolved.data.actor)) };
    }
    if (current.status === "running" || current.status === "queued") return { noop: true };
    if (current.status === "pausing") {
      return { refuse: new IllegalTransitionError(runId, "resume", current.status, "a call that cannot be interrupted is finishing; wait until it is paused (pause(id, { wait: true }), waitFor(id, [\"paused\"]), or `tether pause`, which waits), then resume") };
    }
    if (current.status === "halted") return { refuse: new RunHaltedError(runId, "resume") };
    if (current.status !== "paused") return { refuse: new IllegalTransitionError(runId, "resume", current.status) };
    if (current.inflight?.uncertain && !resolve) return { refuse: new UncertainEffectError(runId, current.inflight.callSeq, current.inflight.name) };
    const awaiting = undecided(current);
    if (awaiting.length) return { refuse: new ApprovalPendingError(runId, awaiting.map((a) => ({ callSeq: a.callSeq, tool: a.tool }))) };
    const agent = ctx.agents.get(current.agent);
    // Old state never runs through new code unless the agent says the change is compatible.
    if (agent && !versionCompatible(agent, current.agentVersion)) return { refuse: new VersionMismatchError(runId, agent.name, current.agentVersion, agent.version) };
    // The snapshot is verified (a corrupt one refuses here, nothing deleted); it is parsed only
    // when this command changes the state, so a plain resume does not parse what the worker will.
    const stored = await ctx.store.loadState(runId);
    const load = () => restoreState(runId, stored);
    let restored = options.message !== undefined || options.patch !== undefined ? load() : undefined;
    if (!restored) {
      const chain = verifyStoredState(runId, stored);
      // This process's executor, if it claims the run next, starts from what was just read.
      if (host.claims()) ctx.snapshots.offer(runId, stored, chain);
    }
    const journal: JournalInput[] = [];
    if (!options.force && agent) {
      const reasons = await staleReasons(ctx, current, agent, now);
      if (reasons.length) {
        if (!agent.onStale) return { refuse: new StaleSnapshotError(runId, reasons) };
        restored ??= load();
        const before = cloneState(restored.state);
        restored.state = await agent.onStale(restored.state, reasons);
        journal.push({ type: "state.patched", at: now, data: { actor: "onStale", reasons, changed: describeRefresh(before, restored.state) } });
      }
    }
    const edits = restored ? editState(agent, restored.state, command.actor, { message: options.message, patch: options.patch }, now) : undefined;
    if (edits) journal.push(...edits.journal);
    if (resolve && !current.inflight?.uncertain) {
      return { refuse: new InvalidInputError(`run ${runId} has no uncertain effect to resolve`) };
    }
    // Paused by a budget it still exceeds: resuming would pause again at once, unless this command raises it.
    if (current.statusReason?.startsWith("budget_")) {
      const still = trippedBudget({ ...current.budgets, ...options.budgets }, { usage: current.usage, step: current.step, activeMs: current.activeMs, repeatedToolCalls: 0 });
      if (still) return { refuse: new BudgetExceededError(runId, still) };
    }
    const changed = journal.length > 0;
    // A worker here that can execute the run at once claims it in this same write (one write, not two).
    const claim = host.claims() && agent ? host.claimInline(current, now) : undefined;
    claimedInline = claim !== undefined;
    leaseTaken ||= claimedInline;
    return {
      update: {
        ...(claim ? { claim } : {}),
        set: {
          status: "running",
          statusReason: null,
          lease: null,
          runningSince: now,
          // Without the agent's code here the stale check (and version check) cannot run: the worker that claims the run runs them first.
          uncheckedResume: !agent && !options.force ? { actor: command.actor, at: now } : null,
          forcedResume: options.force ? { actor: command.actor, at: now } : null,
          ...(options.budgets ? { budgets: { ...current.budgets, ...options.budgets } } : {}),
          // A person looked at the repeated failures: the count starts again.
          ...(current.guard.failures ? { guard: { ...current.guard, failures: 0, recentFailures: [] } } : {}),
          ...(resolve && current.inflight ? resolvedCalls(current, { action: resolve.action, result: resolve.result ?? null, actor: command.actor }) : {}),
        },
        journal: [...journal, statusEntry(now, "paused", "running", options.reason ?? null, { actor: command.actor })],
        ...(changed && restored && edits ? { snapshot: restored.writer.prepare(edits.state, current.step, now) } : {}),
      },
      applied: true,
    };
  }).catch((error: unknown) => {
    settle();
    throw error;
  });
  if (run.status === "running" && claimedInline) settle(run);
  else {
    settle();
    if (run.status === "running" && host.claims()) host.claimSoon(run);
  }
  return run;
}

/** The decision goes on the uncertain call, and on its entry among the calls in flight (several may wait in turn). */
function resolvedCalls(run: RunRecord, resolution: NonNullable<InflightCall["resolution"]>): RunPatch {
  const inflight = { ...run.inflight!, resolution };
  return {
    inflight,
    ...(run.inflightCalls ? { inflightCalls: run.inflightCalls.map((c) => (c.callSeq === inflight.callSeq ? { ...c, resolution } : c)) } : {}),
  };
}
