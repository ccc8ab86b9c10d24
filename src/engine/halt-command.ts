import { approvalRequired } from "./approval.js";
import { applyControl, newCommand, type ControlHost, type ControlOptions } from "./control-command.js";
import { IllegalTransitionError, TetherError } from "./errors.js";
import { isTerminal, type RunStatus } from "./status.js";
import { statusEntry } from "./status-entry.js";
import type { RunRecord } from "./store.js";

const activeStatuses: RunStatus[] = ["queued", "running", "pausing", "paused", "cancelling", "halted"];

/** A run a halt or an unhalt could not change (its record damaged, say), with the error it met. */
export interface RunFailure {
  runId: string;
  code: string;
  message: string;
}

export interface HaltResult {
  scope: string;
  halted: string[];
  /** Runs in scope the halt could not stop: each named with why. Every other run was halted. */
  failed: RunFailure[];
}

function failureOf(runId: string, error: unknown): RunFailure {
  if (TetherError.isInstance(error)) return { runId, code: error.code, message: error.message };
  return { runId, code: "internal_error", message: error instanceof Error ? error.message : String(error) };
}

/**
 * The kill switch: every run in scope halted at once, in-flight calls aborted, no compensation.
 * The runs are found by their rows' own columns, and one that cannot be halted (its record
 * damaged) is named in `failed` while every other run is halted: nothing one run holds stops it.
 */
export async function haltRuns(host: ControlHost, options: ControlOptions & { agent?: string }): Promise<HaltResult> {
  const store = host.ctx.store;
  const scope = options.agent ? `agent:${options.agent}` : "*";
  const global = newCommand(host.ctx, "halt", null, options, { scope });
  await store.setHalt({ scope, actor: global.actor, reason: global.reason, at: global.createdAt });
  await store.insertCommand({ ...global, appliedAt: global.createdAt, outcome: "applied" });
  const halted: string[] = [];
  const failed: RunFailure[] = [];
  const runs = await store.listRunRefs({ status: activeStatuses.filter((s) => s !== "halted"), agent: options.agent, limit: 100_000 });
  for (const candidate of runs) {
    const command = newCommand(host.ctx, "halt", candidate.id, options, { scope });
    try {
      await applyControl(host, candidate.id, command, async (run, now) => {
        if (run.status === "halted") return { noop: true };
        if (isTerminal(run.status)) return { refuse: new IllegalTransitionError(run.id, "halt", run.status) };
        const since = run.runningSince;
        return {
          update: {
            set: {
              status: "halted",
              statusReason: options.reason ?? `halted by ${command.actor}`,
              pauseMode: null,
              haltedFrom: run.status === "cancelling" ? "cancelling" : null,
              ...(since !== null ? { runningSince: null, activeMs: run.activeMs + now - since } : {}),
            },
            journal: [statusEntry(now, run.status, "halted", options.reason ?? null, { actor: command.actor })],
            // A cancel under way stays pending: lifting the halt takes the run back to cancelling, and the cancel ends applied.
            settleCommands: { at: now, outcomes: { pause: "superseded: halt" } },
          },
          applied: true,
        };
      });
      halted.push(candidate.id);
    } catch (error) {
      // Ended since it was listed: nothing to halt.
      if (!(error instanceof IllegalTransitionError)) failed.push(failureOf(candidate.id, error));
    }
  }
  return { scope, halted, failed };
}

export interface UnhaltResult {
  scope: string;
  /** Halted runs now paused: their owners decide what next. */
  paused: string[];
  /** Runs the halt stopped while they were cancelling: back to `cancelling`, their compensation goes on. */
  cancelling: string[];
  /** Halted runs the unhalt could not change (a damaged record): still halted, each named with why. */
  failed: RunFailure[];
}

/**
 * Lifts the halt: halted runs become paused, and their owners decide what next. A run the halt
 * stopped while it was being cancelled goes back to `cancelling`: the cancel was a person's
 * decision that the halt only postponed, and a paused run could be resumed past it.
 */
export async function unhaltRuns(host: ControlHost, options: ControlOptions & { agent?: string }): Promise<UnhaltResult> {
  const store = host.ctx.store;
  const scope = options.agent ? `agent:${options.agent}` : "*";
  const global = newCommand(host.ctx, "unhalt", null, options, { scope });
  await store.clearHalt(scope);
  await store.insertCommand({ ...global, appliedAt: global.createdAt, outcome: "applied" });
  const paused: string[] = [];
  const cancelling: string[] = [];
  const failed: RunFailure[] = [];
  const remaining = await store.listHalts();
  for (const candidate of await store.listRunRefs({ status: ["halted"], agent: options.agent, limit: 100_000 })) {
    if (remaining.some((h) => h.scope === "*" || h.scope === `agent:${candidate.agent}`)) continue;
    const command = newCommand(host.ctx, "unhalt", candidate.id, options, { scope });
    let to = "paused" as "paused" | "cancelling";
    let run: RunRecord;
    try {
      run = await applyControl(host, candidate.id, command, async (current, now) => {
        // Moved on since it was listed (a cancel of the halted run): nothing of it to lift.
        if (current.status !== "halted") return { refuse: new IllegalTransitionError(current.id, "unhalt", current.status) };
        to = current.haltedFrom === "cancelling" ? "cancelling" : "paused";
        const reason = to === "cancelling" ? "halt lifted: the cancel goes on" : "halt lifted";
        // A run that waited for approvals when it was halted waits for them again: listed as
        // waiting for a person, its deadlines found by every worker, the last decision continuing it.
        const waitsForApproval = to === "paused" && (current.approvals ?? []).some((a) => !a.decision);
        return {
          update: { set: { status: to, statusReason: waitsForApproval ? approvalRequired : reason, lease: null, haltedFrom: null }, journal: [statusEntry(now, "halted", to, reason, { actor: command.actor })] },
          applied: true,
        };
      });
    } catch (error) {
      if (!(error instanceof IllegalTransitionError)) failed.push(failureOf(candidate.id, error));
      continue;
    }
    (to === "cancelling" ? cancelling : paused).push(candidate.id);
    if (to === "cancelling" && host.claims() && host.ctx.agents.has(run.agent)) host.claimSoon(run);
  }
  return { scope, paused, cancelling, failed };
}
