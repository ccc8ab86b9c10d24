import { pendingCompensations } from "../engine/compensation.js";
import type { Runtime } from "../engine/runtime.js";
import { isTerminal } from "../engine/status.js";
import type { RunRecord } from "../engine/store.js";
import type { RunView } from "./api-types.js";

/** How long a run that is stopping has been waiting on the call still in flight. */
export function waitingForMs(run: RunRecord, now: number): number | null {
  if (run.waitingFor) return Math.max(0, now - run.waitingFor.since);
  if ((run.status === "pausing" || run.status === "cancelling") && run.inflight) return Math.max(0, now - run.inflight.startedAt);
  return null;
}

export async function runView(runtime: Runtime, run: RunRecord): Promise<RunView> {
  const pending = isTerminal(run.status) ? [] : pendingCompensations(await runtime.store.listEffects(run.id));
  return {
    ...run,
    pendingCompensations: pending.map((e) => ({ callSeq: e.callSeq, tool: e.tool, input: e.input })),
    waitingForMs: waitingForMs(run, runtime.clock.now()),
  };
}

export function runViews(runtime: Runtime, runs: readonly RunRecord[]): Promise<RunView[]> {
  return Promise.all(runs.map((run) => runView(runtime, run)));
}
