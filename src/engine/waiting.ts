import type { RunStatus } from "./status.js";
import type { JournalEntry, RunRecord } from "./store.js";

/**
 * Runs that wait for a person: paused for a reason only a person can settle (an approval, an
 * uncertain effect, a tripped budget or guard, a stale snapshot, a replay that diverged, a
 * version change), or halted until an admin lifts the halt. A run a person paused themselves
 * is not in the list: it waits for whoever paused it, who knows.
 */

/** The reasons a paused run waits for a person: the code at the start of its status reason. */
export const personWaitCodes = [
  "approval_required",
  "uncertain_effect",
  "loop_detected",
  "stale_snapshot",
  "repeated_failures",
  "nondeterministic_replay",
  "version_mismatch",
] as const;

/** Every budget's code starts with this (`budget_tokens`, `budget_cost`, `budget_steps`, `budget_time`). */
export const budgetCodePrefix = "budget_";

export type PersonWaitReason = (typeof personWaitCodes)[number] | `budget_${string}` | "halted";

export interface PersonWait {
  reason: PersonWaitReason;
  /** The run's status reason as written, e.g. `budget_steps: 60 of 60 steps`. */
  detail: string;
}

/** The wait reason a paused run's status reason names (`budget_steps: 3 of 3 steps` → `budget_steps`), if a person must act on it. */
export function personWaitReasonOf(statusReason: string | null | undefined): PersonWaitReason | undefined {
  const code = statusReason ? /^([a-z_]+)(?::|$)/.exec(statusReason)?.[1] : undefined;
  if (!code) return undefined;
  if ((personWaitCodes as readonly string[]).includes(code)) return code as PersonWaitReason;
  if (code.startsWith(budgetCodePrefix) && code.length > budgetCodePrefix.length) return code as PersonWaitReason;
  return undefined;
}

/** Whether the run waits for a person, and why. */
export function waitingForPerson(run: Pick<RunRecord, "status" | "statusReason" | "inflight">): PersonWait | null {
  const detail = run.statusReason ?? "";
  if (run.status === "halted") return { reason: "halted", detail: detail || "halted" };
  if (run.status !== "paused") return null;
  // A call left uncertain needs a decision whatever the pause was for.
  if (run.inflight?.uncertain) return { reason: "uncertain_effect", detail: detail || "uncertain_effect" };
  const reason = personWaitReasonOf(run.statusReason);
  return reason ? { reason, detail } : null;
}

/** The entry that began the run's current wait: the last `status` entry into `status` among `entries`. */
export function waitStartIn(entries: readonly JournalEntry[], status: RunStatus): JournalEntry | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry.type === "status" && entry.data.to === status) return entry;
  }
  return undefined;
}

/**
 * Finds the entry that began the run's current wait by reading its journal backwards from
 * the end, a page at a time (usually one page: little is written while a run waits).
 */
export async function findWaitStart(
  run: Pick<RunRecord, "status" | "journalSeq">,
  readJournal: (afterSeq: number, limit: number) => Promise<readonly JournalEntry[]>,
  pageSize = 100,
): Promise<JournalEntry | undefined> {
  for (let end = run.journalSeq; end > 0; end -= pageSize) {
    const after = Math.max(0, end - pageSize);
    const found = waitStartIn(await readJournal(after, end - after), run.status);
    if (found) return found;
  }
  return undefined;
}
