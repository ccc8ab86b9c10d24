import type { EngineContext } from "./engine-context.js";
import { TetherError, type InheritingForkDetail } from "./errors.js";
import type { JsonObject } from "./json.js";
import { runStatuses, terminalStatuses, type RunStatus } from "./status.js";
import type { DamagedRun, EffectRecord, RunRecord } from "./store.js";

/** What a cancel does with effects a live fork inherited: undo them anyway, or leave them for the forks. */
export type InheritedChoice = "compensate" | "keep";

export const inheritedChoices: readonly InheritedChoice[] = ["compensate", "keep"];

/** An effect of the run that live forks inherited, and which. */
export interface InheritedEffect {
  callSeq: number;
  tool: string;
  forks: string[];
}

/** The live forks (forks of forks included) that inherited effects of a run, and those effects. */
export interface ForkInheritance {
  forks: InheritingForkDetail[];
  effects: InheritedEffect[];
}

/** A fork being cancelled no longer relies on anything, so it is not live here. */
const liveStatuses: RunStatus[] = runStatuses.filter((s) => !terminalStatuses.has(s) && s !== "cancelling");
/** How many live runs are read to look for forks: every one on any real store. */
const liveRunsRead = 1_000_000;
const journalPage = 1_000;

/**
 * Which of `effects` (the run's effects a cancel would undo) live forks inherited: a fork took
 * the run's state at its `fromStep`, so it inherited every effect that completed at or before
 * that step. A fork of a fork inherits what its parent took of the run; the chain is followed
 * through forks that have ended. Costs one read of the agent's live runs when the run has no live
 * fork (nothing when it has no effect to undo); otherwise also a snapshot per fork step and the
 * journal up to the latest.
 */
export async function forkInheritance(ctx: EngineContext, run: RunRecord, effects: readonly EffectRecord[]): Promise<ForkInheritance> {
  if (effects.length === 0) return { forks: [], effects: [] };
  const runId = run.id;
  // A fork runs the same agent as its source (whatever the version), so only that agent's live runs are read.
  const damaged: DamagedRun[] = [];
  const live = (await ctx.store.listRuns({ status: liveStatuses, agent: run.agent, limit: liveRunsRead }, damaged)).filter((r) => r.forkedFrom !== null && r.id !== runId);
  if (damaged.length > 0) throw unreadableLiveRuns(run, damaged);
  if (live.length === 0) return { forks: [], effects: [] };
  const forks = await forksOf(ctx, runId, live);
  if (forks.length === 0) return { forks: [], effects: [] };

  // The journal entry each fork step's snapshot sits on: everything up to it is in that state.
  const entryAtStep = new Map<number, number | undefined>();
  for (const { step } of forks) {
    if (!entryAtStep.has(step)) entryAtStep.set(step, (await ctx.store.loadState(runId, { atStep: step })).head.entrySeq);
  }
  const completedAt = await completionEntries(ctx, runId, effects, Math.max(...[...entryAtStep.values()].map((seq) => seq ?? Number.MAX_SAFE_INTEGER)));

  const inheritedBy = new Map<number, string[]>();
  const details: InheritingForkDetail[] = [];
  for (const { fork, step } of forks) {
    const upTo = entryAtStep.get(step);
    // Unknown (a store that does not say where the snapshot sits, or no completion entry found): inherited, so a person decides.
    const inherited = effects.filter((e) => {
      const at = completedAt.get(e.callSeq);
      return upTo === undefined || at === undefined || at <= upTo;
    });
    if (inherited.length === 0) continue;
    details.push({ runId: fork.id, status: fork.status, fromStep: step, effects: inherited.map((e) => e.callSeq) });
    for (const e of inherited) inheritedBy.set(e.callSeq, [...(inheritedBy.get(e.callSeq) ?? []), fork.id]);
  }
  return {
    forks: details,
    effects: effects.filter((e) => inheritedBy.has(e.callSeq)).map((e) => ({ callSeq: e.callSeq, tool: e.tool, forks: inheritedBy.get(e.callSeq)! })),
  };
}

/** Which of `effects` a fork from `step` of the run inherits: those completed at or before that step (all, when that cannot be told). */
export async function inheritedAtStep(ctx: EngineContext, runId: string, step: number, effects: readonly EffectRecord[]): Promise<EffectRecord[]> {
  if (effects.length === 0) return [];
  const upTo = (await ctx.store.loadState(runId, { atStep: step })).head.entrySeq;
  const completedAt = await completionEntries(ctx, runId, effects, upTo ?? Number.MAX_SAFE_INTEGER);
  return effects.filter((e) => {
    const at = completedAt.get(e.callSeq);
    return upTo === undefined || at === undefined || at <= upTo;
  });
}

/** The choice as the journal and the command record keep it. */
export function inheritanceJson(inheritance: ForkInheritance, choice: InheritedChoice | undefined): JsonObject {
  if (inheritance.effects.length === 0) return {};
  return {
    ...(choice ? { inherited: choice } : {}),
    forks: inheritance.forks.map((f) => ({ runId: f.runId, status: f.status, fromStep: f.fromStep, effects: f.effects })),
    inheritedEffects: inheritance.effects.map((e) => ({ callSeq: e.callSeq, tool: e.tool, forks: e.forks })),
  };
}

/** Each live run descending from `runId` by forks, with the step of `runId` its state came from. */
async function forksOf(ctx: EngineContext, runId: string, live: readonly RunRecord[]): Promise<{ fork: RunRecord; step: number }[]> {
  const parents = new Map<string, RunRecord["forkedFrom"]>(live.map((r) => [r.id, r.forkedFrom]));
  const found: { fork: RunRecord; step: number }[] = [];
  for (const fork of live) {
    let link = fork.forkedFrom;
    // A fork of a fork starts at or after its parent's first step, so it holds what its parent took of the run.
    for (let depth = 0; link && link.runId !== runId && depth < 64; depth++) {
      if (!parents.has(link.runId)) parents.set(link.runId, (await ctx.store.getRun(link.runId))?.forkedFrom ?? null);
      link = parents.get(link.runId) ?? null;
    }
    if (link?.runId === runId) found.push({ fork, step: link.step });
  }
  return found;
}

/** The journal entry of each effect's `call.completed`, read up to `upTo`. */
async function completionEntries(ctx: EngineContext, runId: string, effects: readonly EffectRecord[], upTo: number): Promise<Map<number, number>> {
  const wanted = new Set(effects.map((e) => e.callSeq));
  const found = new Map<number, number>();
  let afterSeq = 0;
  while (found.size < wanted.size && afterSeq < upTo) {
    const page = await ctx.store.readJournal(runId, { afterSeq, limit: journalPage });
    for (const entry of page) {
      if (entry.type === "call.completed" && entry.callSeq !== undefined && wanted.has(entry.callSeq)) found.set(entry.callSeq, entry.seq);
    }
    if (page.length < journalPage) break;
    afterSeq = page[page.length - 1].seq;
  }
  return found;
}

/**
 * A live run of the agent whose record cannot be read may be a fork that inherited the effects a
 * cancel would undo: the cancel is refused (`store_corrupt`, naming it) rather than undo them unseen.
 */
function unreadableLiveRuns(run: RunRecord, damaged: readonly DamagedRun[]): TetherError<"store_corrupt"> {
  const ids = damaged.map((d) => d.id);
  return new TetherError(
    "store_corrupt",
    `cannot tell which of run ${run.id}'s effects its live forks inherited: ${ids.length === 1 ? "a live run" : "live runs"} of agent ${run.agent} cannot be read (${ids.join(", ")}: ${damaged[0].message}); nothing was undone`,
    { location: `the live runs of agent ${run.agent}`, problem: damaged[0].message, runId: run.id, damaged: ids },
  );
}
