import { pendingCompensations } from "../engine/compensation.js";
import type { Runtime } from "../engine/runtime.js";
import { isTerminal } from "../engine/status.js";
import type { RunRecord, WaitingFor } from "../engine/store.js";
import { waitingForWorker } from "../engine/worker-wait.js";
import type { RunView } from "./api-types.js";

/**
 * What a stopping run waits on: what the executor recorded, or else the call still in flight.
 * `waitingFor` and `waitingForMs` are always given together (both null, or both set).
 */
export function waitingOn(run: RunRecord): WaitingFor | null {
  if (run.waitingFor) return run.waitingFor;
  if ((run.status === "pausing" || run.status === "cancelling") && run.inflight) return { kind: run.inflight.kind, name: run.inflight.name, callSeq: run.inflight.callSeq, since: run.inflight.startedAt };
  return null;
}

/** How long a run that is stopping has been waiting on the call still in flight. */
export function waitingForMs(run: RunRecord, now: number): number | null {
  const waiting = waitingOn(run);
  return waiting ? Math.max(0, now - waiting.since) : null;
}

/**
 * A run as the API shows it: the record (with `inflight`, and `inflightCalls` listing every call
 * in flight when several run at once), what a cancel would compensate, and what a stopping run waits on.
 */
export async function runView(runtime: Runtime, run: RunRecord): Promise<RunView> {
  const pending = isTerminal(run.status) ? [] : pendingCompensations(await runtime.store.listEffects(run.id));
  return {
    ...run,
    pendingCompensations: pending.map((e) => ({ callSeq: e.callSeq, tool: e.tool, input: e.input })),
    waitingFor: waitingOn(run),
    waitingForMs: waitingForMs(run, runtime.clock.now()),
    waitingForWorker: waitingForWorker(run, runtime.clock.now()),
  };
}

export function runViews(runtime: Runtime, runs: readonly RunRecord[]): Promise<RunView[]> {
  return Promise.all(runs.map((run) => runView(runtime, run)));
}
