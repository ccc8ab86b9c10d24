import { pendingCompensations } from "./compensation.js";
import { applyControl, getRun, hasLiveLease, newCommand, type ControlHost, type ControlOptions } from "./control-command.js";
import { ForkInheritsEffectsError, IllegalTransitionError, InvalidInputError, type InheritingForkDetail } from "./errors.js";
import { forkInheritance, inheritanceJson, inheritedChoices, type InheritedChoice, type InheritedEffect } from "./fork-inheritance.js";
import type { Json } from "./json.js";
import { isTerminal, type RunStatus } from "./status.js";
import { statusEntry } from "./status-entry.js";
import type { RunRecord } from "./store.js";

export interface CancelPreview {
  runId: string;
  status: RunStatus;
  /** Whether a cancel would apply at all: false for a run that has ended (and everything below is empty). */
  cancellable: boolean;
  compensations: { callSeq: number; tool: string; input: Json }[];
  resources: string[];
  uncertain: { callSeq: number; tool: string }[];
  /** Live forks (forks of forks included) that inherited effects a cancel would undo. */
  forks: InheritingForkDetail[];
  /** Those effects, each with the forks that inherited it: the cancel must say `inherited: "compensate"` or `"keep"`. */
  inherited: InheritedEffect[];
}

export interface CancelOptions extends ControlOptions {
  /**
   * What to do with effects a live fork inherited (and still relies on): `compensate` undoes them
   * anyway, `keep` leaves them (listed in the report as kept). Without it, a cancel that would
   * undo any is refused with `fork_inherits_effects`, naming the forks and the effects.
   */
  inherited?: InheritedChoice;
}

/** The cancel command: the run becomes `cancelling`, and the worker that holds it (or claims it) compensates and releases. */
export async function cancelRun(host: ControlHost, runId: string, options: CancelOptions): Promise<RunRecord> {
  if (options.inherited !== undefined && !inheritedChoices.includes(options.inherited)) {
    throw new InvalidInputError(`inherited must be "compensate" or "keep", not ${JSON.stringify(options.inherited)}`);
  }
  const command = newCommand(host.ctx, "cancel", runId, options);
  const reason = options.reason ?? `cancelled by ${command.actor}`;
  let claim = false;
  const run = await applyControl(host, runId, command, async (current, now) => {
    if (current.status === "cancelling" || current.status === "cancelled") return { noop: true };
    if (isTerminal(current.status)) return { refuse: new IllegalTransitionError(runId, "cancel", current.status) };
    const effects = pendingCompensations(await host.ctx.store.listEffects(runId));
    const inheritance = await forkInheritance(host.ctx, current, effects);
    // The command (and so its journal entry, refused or not) names the forks, the effects and the choice.
    command.payload = inheritanceJson(inheritance, options.inherited);
    if (inheritance.effects.length > 0 && options.inherited === undefined) return { refuse: new ForkInheritsEffectsError(runId, inheritance.forks, inheritance.effects) };
    const keep = options.inherited === "keep" ? new Set(inheritance.effects.map((e) => e.callSeq)) : new Set<number>();
    const held = host.isHeld(current, now);
    // Claim from the lease alone: an executor that just wrote `paused` is still in the map for a
    // moment but no longer reacts, and `tryClaim` waits for it before taking the run.
    claim = !hasLiveLease(current, now) && host.claims() && host.ctx.agents.has(current.agent);
    const since = current.runningSince;
    return {
      update: {
        set: {
          status: "cancelling",
          statusReason: reason,
          pauseMode: null,
          ...(since !== null && !held ? { runningSince: null, activeMs: current.activeMs + now - since } : {}),
        },
        // Kept effects are never compensated: the worker that compensates skips them, and the report lists them.
        ...(keep.size ? { effects: effects.filter((e) => keep.has(e.callSeq)).map((e) => ({ ...e, state: "kept" as const, updatedAt: now })) } : {}),
        journal: [statusEntry(now, current.status, "cancelling", reason)],
      },
      applied: false,
    };
  });
  if (claim) host.claimSoon(run);
  return run;
}

/** What a cancel would do now: compensations newest first and the resources to release. */
export async function previewCancel(host: ControlHost, runId: string): Promise<CancelPreview> {
  const run = await getRun(host.ctx, runId);
  // A run that has ended cannot be cancelled: nothing would be compensated, so nothing is offered.
  if (isTerminal(run.status)) return { runId, status: run.status, cancellable: false, compensations: [], resources: [], uncertain: [], forks: [], inherited: [] };
  const effects = pendingCompensations(await host.ctx.store.listEffects(runId));
  const inheritance = run.status === "cancelling" ? { forks: [], effects: [] } : await forkInheritance(host.ctx, run, effects);
  return {
    runId,
    status: run.status,
    cancellable: true,
    compensations: effects.map((e) => ({ callSeq: e.callSeq, tool: e.tool, input: e.input })),
    resources: Object.entries(run.resources)
      .filter(([, held]) => !held.releasedForPause)
      .map(([name]) => name),
    // As the cancel's report will: a tool call still in flight may or may not have had its
    // effect. A model call in flight is aborted and touches nothing: it is not listed.
    uncertain: (run.inflightCalls?.length ? run.inflightCalls : run.inflight ? [run.inflight] : []).filter((c) => c.kind !== "model").map((c) => ({ callSeq: c.callSeq, tool: c.name })),
    forks: inheritance.forks,
    inherited: inheritance.effects,
  };
}
