import type { RunStatus } from "./status.js";
import type { RunRecord } from "./store.js";

/**
 * A run that needs a worker and that no worker holds: queued or resumed but not claimed yet, or
 * orphaned by a worker whose lease ran out. Worth saying once it lasts (`workerWaitNoticeMs`): a
 * worker normally claims a run within its poll, and with no worker process the run would read
 * `running` forever while nothing runs it.
 */
export interface WorkerWait {
  /** Since when no worker holds the run (ms). */
  since: number;
  forMs: number;
}

/** How long a run may wait for a worker before it is reported as waiting. */
export const workerWaitNoticeMs = 3_000;

/** The statuses in which a run needs a worker to go on. */
export const needsWorker: readonly RunStatus[] = ["queued", "running", "pausing", "cancelling"];

export function waitingForWorker(
  run: Pick<RunRecord, "status" | "lease" | "runningSince" | "createdAt" | "updatedAt">,
  now: number,
  noticeMs = workerWaitNoticeMs,
): WorkerWait | null {
  if (!needsWorker.includes(run.status)) return null;
  if (run.lease && run.lease.until >= now) return null;
  const since = run.lease ? run.lease.until : run.status === "queued" ? run.createdAt : run.status === "running" ? (run.runningSince ?? run.updatedAt) : run.updatedAt;
  const forMs = now - since;
  return forMs >= noticeMs ? { since, forMs } : null;
}

/** The words for it, everywhere a run is shown. */
export function workerWaitText(wait: WorkerWait): string {
  return `waiting for a worker for ${Math.round(wait.forMs / 1000)} s: no worker has claimed it (start one: \`tether worker\` or \`tether serve\`, or startWorker() in a process with the agent's code)`;
}
