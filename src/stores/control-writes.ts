import type { RunUpdate } from "../engine/store.js";

/**
 * Which run writes are control writes, as both stores treat them: they go ahead of the steps
 * waiting (SQLite's group commit, PostgreSQL's control lane) and are told to the workers.
 */

/**
 * A write the run's executing worker did not make: not fenced by its epoch, a claim, or a
 * control command (which carries the epoch it was decided on).
 */
export function madeElsewhere(update: RunUpdate): boolean {
  return update.expect?.epoch === undefined || update.claim !== undefined || update.insertCommand !== undefined;
}

/** A status a control command puts a run in: its writes take the control lane. */
export function controlled(status: string | undefined): boolean {
  return status === "pausing" || status === "paused" || status === "cancelling" || status === "halted";
}

/**
 * A status a run's executor still writes in, having been told to stop (it writes the step under
 * way, then `paused` or its cancellation): its writes go ahead of other runs' steps, like the
 * command's, since the person who asked waits for them.
 */
export function stopping(status: string | undefined): boolean {
  return status === "pausing" || status === "cancelling" || status === "halted";
}
