import { applyControl, newCommand, type ControlHost, type ControlOptions } from "./control-command.js";
import { IllegalTransitionError, RunHaltedError } from "./errors.js";
import { statusEntry } from "./status-entry.js";
import type { RunRecord } from "./store.js";

export interface PauseOptions extends ControlOptions {
  /** "immediate" (default) aborts an in-flight model call; "boundary" lets it finish. */
  mode?: "immediate" | "boundary";
  /**
   * Resolve once the run is `paused` (or has ended otherwise: halted, cancelled, completed,
   * failed) instead of as soon as the command is recorded, when it may still be `pausing`
   * while a call that cannot be interrupted finishes. Default false.
   */
  wait?: boolean;
  /** With `wait`: give up after this long with `wait_timeout`. Default 120 s. */
  timeoutMs?: number;
}

/** The pause command: `pausing` while a worker holds the run (it stops at the next safe point), `paused` at once otherwise. */
export async function pauseRun(host: ControlHost, runId: string, options: PauseOptions): Promise<RunRecord> {
  const recorded = await recordPause(host, runId, options);
  if (!options.wait || recorded.status !== "pausing") return recorded;
  return host.waitFor(runId, (run) => run.status !== "pausing" && run.status !== "running", { timeoutMs: options.timeoutMs ?? 120_000 });
}

async function recordPause(host: ControlHost, runId: string, options: PauseOptions): Promise<RunRecord> {
  const mode = options.mode ?? "immediate";
  const command = newCommand(host.ctx, "pause", runId, options, { mode });
  const reason = options.reason ?? `paused by ${command.actor}`;
  return applyControl(host, runId, command, async (run, now) => {
    if (run.status === "pausing" || run.status === "paused") return { noop: true };
    if (run.status === "halted") return { refuse: new RunHaltedError(runId, "pause") };
    if (run.status !== "running") return { refuse: new IllegalTransitionError(runId, "pause", run.status) };
    if (host.isHeld(run, now)) {
      // At the boundary the run waits for the call in flight (the oldest, when there are
      // several): the answer says so at once, not only once the worker has seen the command.
      const inflight = mode === "boundary" ? run.inflight : null;
      const waitingFor = inflight ? { waitingFor: { kind: inflight.kind, name: inflight.name, callSeq: inflight.callSeq, since: inflight.startedAt } } : {};
      return { update: { set: { status: "pausing", statusReason: reason, pauseMode: mode, ...waitingFor }, journal: [statusEntry(now, "running", "pausing", reason)] }, applied: false };
    }
    // No worker holds it, so nothing is in flight: it is paused at once.
    const since = run.runningSince;
    return {
      update: {
        set: { status: "paused", statusReason: reason, pauseMode: null, runningSince: null, activeMs: run.activeMs + (since === null ? 0 : now - since) },
        journal: [statusEntry(now, "running", "pausing", reason), statusEntry(now, "pausing", "paused", reason)],
        // A lease that ran out may belong to a worker that is only slow, not dead: the epoch moves
        // on (a lease that is over at once), so its late writes are refused instead of landing
        // after `paused`.
        ...(run.lease ? { claim: { workerId: `paused-by:${command.actor}`, until: now } } : {}),
      },
      applied: true,
    };
  });
}
