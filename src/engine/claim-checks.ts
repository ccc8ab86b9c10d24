import type { AgentDefinition } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import { restoreState } from "./snapshot.js";
import { describeRefresh, staleReasons } from "./stale-check.js";
import { cloneState } from "./state.js";
import { statusEntry } from "./status-entry.js";
import type { JournalInput, RunPatch, RunRecord, RunUpdate } from "./store.js";
import { versionCompatible, versionMismatchReason } from "./version-pin.js";

/**
 * What the worker that has just claimed a run checks before its first call, when the process
 * that sent the run on could not: that its code may continue the run (the agent's version, see
 * version-pin.ts), and, after a resume from a process without the agent's code, the stale check
 * (with `onStale`'s refresh, journaled). A run that fails a check is paused with the reason
 * (`version_mismatch: …`, `stale_snapshot: …`) and does not execute here.
 */

/** Whether the claimed run needs a check before it executes (most do not: then nothing is read or written). */
export function needsClaimCheck(agent: AgentDefinition, run: RunRecord): boolean {
  if (run.status !== "running") return false;
  return !versionCompatible(agent, run.agentVersion) || Boolean(run.uncheckedResume);
}

/**
 * Runs the checks on a run this worker claimed (lease epoch `claimed.epoch`). Returns the record
 * to execute, or undefined when the run must not execute here: a check paused it, or the lease
 * went to another worker meanwhile.
 */
export async function checkClaimed(ctx: EngineContext, agent: AgentDefinition, claimed: RunRecord): Promise<RunRecord | undefined> {
  let run = claimed;
  for (let attempt = 0; attempt < 50; attempt++) {
    if (run.epoch !== claimed.epoch || run.lease?.workerId !== ctx.workerId) return undefined;
    // A command landed since the claim (a pause, a cancel): the executor carries it out as usual.
    if (!needsClaimCheck(agent, run)) return run;
    const now = ctx.clock.now();
    const update = await decide(ctx, agent, run, now);
    const result = await ctx.store.update({ ...update.write, runId: run.id, expect: { version: run.version, epoch: claimed.epoch } });
    if (result.ok) {
      ctx.bus.publishJournal(result.journal);
      return update.execute ? result.run : undefined;
    }
    run = result.run;
  }
  return undefined;
}

async function decide(ctx: EngineContext, agent: AgentDefinition, run: RunRecord, now: number): Promise<{ write: Omit<RunUpdate, "runId" | "expect">; execute: boolean }> {
  if (!versionCompatible(agent, run.agentVersion)) return { write: pause(run, versionMismatchReason(run, agent), now), execute: false };
  const reasons = await staleReasons(ctx, run, agent, now);
  if (!reasons.length) return { write: { set: { uncheckedResume: null } }, execute: true };
  if (!agent.onStale) return { write: pause(run, `stale_snapshot: ${reasons.join("; ")}`, now), execute: false };
  const { state, writer } = restoreState(run.id, await ctx.store.loadState(run.id));
  const refreshed = await agent.onStale(cloneState(state), reasons);
  const journal: JournalInput[] = [{ type: "state.patched", at: now, data: { actor: "onStale", reasons, changed: describeRefresh(state, refreshed), checkedBy: ctx.workerId } }];
  return { write: { set: { uncheckedResume: null }, journal, snapshot: writer.prepare(refreshed, run.step, now) }, execute: true };
}

/** Paused before its first call here: no call is in flight, so it goes straight to `paused`, and the lease is let go. */
function pause(run: RunRecord, reason: string, now: number): Omit<RunUpdate, "runId" | "expect"> {
  const since = run.runningSince;
  const set: RunPatch = { status: "paused", statusReason: reason, pauseMode: null, lease: null, runningSince: null, activeMs: run.activeMs + (since === null ? 0 : Math.max(0, now - since)), uncheckedResume: null };
  return { set, journal: [statusEntry(now, "running", "pausing", reason), statusEntry(now, "pausing", "paused", reason)] };
}
