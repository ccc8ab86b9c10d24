import type { AgentDefinition } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import { RunNotFoundError, TetherError } from "./errors.js";
import type { JsonObject } from "./json.js";
import type { RunSession } from "./run-session.js";
import type { ControlCommandType } from "./status.js";
import type { CommandRecord, JournalInput, RunRecord, RunUpdate } from "./store.js";

export interface ControlOptions {
  actor?: string;
  reason?: string;
}

/** What a control command needs of the runtime that applies it (the `Runtime` is one). */
export interface ControlHost {
  readonly ctx: EngineContext;
  /** The executor of a run this process executes now, if any. */
  executorOf(runId: string): RunSession | undefined;
  /** A worker executes the run: its live lease, or this process even if a slow tick let the lease lapse. */
  isHeld(run: RunRecord, now: number): boolean;
  /** This process executes runs (a worker that is not closed). */
  claims(): boolean;
  /** Claims in the background: if the claim fails the run stays claimable, and a worker's next poll takes it. */
  claimSoon(run: RunRecord): void;
  /**
   * The lease this process can take in a control command's own write (a resume), when it can
   * execute the run at once; the run is then claimed without a second write. Every lease given
   * is settled with `inlineClaimSettled` once the command is over, whatever its outcome.
   */
  claimInline(run: RunRecord, now: number): NonNullable<RunUpdate["claim"]> | undefined;
  /** The command that took `claimInline`'s lease is over: `run` when its write was applied with it (the run executes here now). */
  inlineClaimSettled(runId: string, run?: RunRecord): void;
  /** Resolves with the run once `predicate` holds (`Runtime.waitFor`). */
  waitFor(runId: string, predicate: (run: RunRecord) => boolean, options: { timeoutMs?: number }): Promise<RunRecord>;
}

/** What `decide` makes of a run: an update (applied now, or requested of its executor), nothing to do, or a refusal. */
export type ControlDecision = { update: Omit<RunUpdate, "runId" | "expect" | "insertCommand">; applied: boolean } | { noop: true } | { refuse: TetherError };

export function hasLiveLease(run: RunRecord, now: number): boolean {
  return run.lease !== null && run.lease.until >= now;
}

export async function getRun(ctx: EngineContext, runId: string): Promise<RunRecord> {
  const run = await ctx.store.getRun(runId);
  if (!run) throw new RunNotFoundError(runId);
  return run;
}

/**
 * The run a control command decides on, read as the store reads what its watcher was told of
 * (`getRuns`: PostgreSQL's control lane), not behind the steps a thousand runs have waiting for
 * the main pool: a pause's answer waited up to ~300 ms there.
 */
async function readForControl(ctx: EngineContext, runId: string): Promise<RunRecord> {
  if (!ctx.store.getRuns) return getRun(ctx, runId);
  const [run] = await ctx.store.getRuns([runId]);
  if (!run) throw new RunNotFoundError(runId);
  return run;
}

export function agentOf(ctx: EngineContext, run: RunRecord): AgentDefinition | undefined {
  return ctx.agents.get(run.agent);
}

export function newCommand(ctx: EngineContext, type: ControlCommandType, runId: string | null, options: ControlOptions, payload: JsonObject = {}): CommandRecord {
  return {
    id: ctx.ids("cmd"),
    runId,
    type,
    actor: options.actor ?? "local",
    reason: options.reason ?? null,
    payload,
    createdAt: ctx.clock.now(),
    appliedAt: null,
    outcome: null,
  };
}

export function controlEntry(ctx: EngineContext, command: CommandRecord, outcome: string): JournalInput {
  return {
    type: "control",
    at: ctx.clock.now(),
    data: { command: command.type, commandId: command.id, actor: command.actor, reason: command.reason, outcome, ...command.payload },
  };
}

/**
 * Records a command that changes nothing (it already holds) or is refused, in the journal too,
 * at the status it was decided on: undefined if the run moved meanwhile (decide again).
 */
export async function recordCommandOnly(ctx: EngineContext, run: RunRecord, command: CommandRecord, outcome: string): Promise<RunRecord | undefined> {
  const result = await ctx.store.update({
    runId: run.id,
    expect: { status: [run.status] },
    journal: [controlEntry(ctx, command, outcome)],
    insertCommand: { ...command, appliedAt: ctx.clock.now(), outcome },
  });
  if (!result.ok) return undefined;
  ctx.bus.publishJournal(result.journal);
  return result.run;
}

/** Applies a control update with optimistic concurrency: re-read and re-decide on conflict. */
export async function applyControl(
  host: ControlHost,
  runId: string,
  command: CommandRecord,
  decide: (run: RunRecord, now: number) => Promise<ControlDecision>,
): Promise<RunRecord> {
  const ctx = host.ctx;
  for (let attempt = 0; ; attempt++) {
    const run = await readForControl(ctx, runId);
    const now = ctx.clock.now();
    const decision = await decide(run, now).catch((error: unknown) => {
      // A refusal found while deciding (a corrupt snapshot, an invalid patch) is recorded like any other.
      if (TetherError.isInstance(error)) return { refuse: error };
      throw error;
    });
    if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while applying ${command.type}`);
    // An outcome that changes nothing is recorded only if the run still has the status it was decided on.
    if ("noop" in decision) {
      const recorded = await recordCommandOnly(ctx, run, command, "already_holds");
      if (recorded) return recorded;
      continue;
    }
    if ("refuse" in decision) {
      if (await recordCommandOnly(ctx, run, command, `refused: ${decision.refuse.code}`)) throw decision.refuse;
      continue;
    }
    const result = await ctx.store.update({
      ...decision.update,
      runId,
      // Edits of a paused run's state need the exact version; a status change only needs the
      // status and the fencing epoch it was decided on, so a busy executor does not starve it.
      expect: decision.update.snapshot ? { version: run.version } : { status: [run.status], epoch: run.epoch },
      journal: [controlEntry(ctx, command, decision.applied ? "applied" : "requested"), ...(decision.update.journal ?? [])],
      insertCommand: decision.applied ? { ...command, appliedAt: now, outcome: "applied" } : command,
    });
    if (!result.ok) continue;
    ctx.bus.publishJournal(result.journal);
    host.executorOf(runId)?.observe(result.run);
    return result.run;
  }
}
