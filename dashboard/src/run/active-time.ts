import type { ReceivedRun } from "../api/runs-feed.js";

/** Milliseconds the run has spent running, including the current spell, ticked forward locally. */
export function activeMsNow(received: ReceivedRun, now: number): number {
  const { run, receivedAt } = received;
  if (run.status !== "running" || run.runningSince === null) return run.activeMs;
  return run.activeMs + Math.max(0, run.updatedAt - run.runningSince) + Math.max(0, now - receivedAt);
}
