import { useEffect, useRef, useState } from "preact/hooks";
import { findWaitStart, waitingForPerson, type PersonWait, type PersonWaitReason } from "../../../src/engine/waiting.js";
import type { ApiClient } from "../api/client.js";
import type { JournalPage, RunView } from "../api/types.js";

export { waitingForPerson, type PersonWait };

const labels: Record<string, string> = {
  approval_required: "Approval",
  uncertain_effect: "Uncertain effect",
  budget_tokens: "Token budget",
  budget_cost: "Cost budget",
  budget_steps: "Step budget",
  budget_time: "Time budget",
  loop_detected: "Loop detected",
  stale_snapshot: "Stale snapshot",
  repeated_failures: "Repeated failures",
  nondeterministic_replay: "Replay diverged",
  version_mismatch: "Agent version changed",
  halted: "Halt",
};

/** What a person is waited on for, in words. */
export function waitReasonLabel(reason: PersonWaitReason): string {
  return labels[reason] ?? (reason.startsWith("budget_") ? `Budget (${reason.slice("budget_".length)})` : reason);
}

/** One wait of a run: a new pause, a new halt or a new reason is a new wait. */
function waitKey(run: RunView): string {
  return `${run.id}|${run.status}|${run.statusReason ?? ""}|${run.activeMs}`;
}

/**
 * When each waiting run's wait began, from the status entry that began it (read back from the
 * end of its journal, once per wait). Runs not yet read are missing from the map.
 */
export function useWaitStarts(client: ApiClient, runs: readonly RunView[], active: boolean): Map<string, number> {
  const known = useRef(new Map<string, number>());
  const asked = useRef(new Set<string>());
  const [, setVersion] = useState(0);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);
  const waiting = active ? runs.filter((run) => waitingForPerson(run)) : [];
  const keys = waiting.map(waitKey).join(",");
  useEffect(() => {
    for (const run of waiting) {
      const key = waitKey(run);
      if (asked.current.has(key)) continue;
      asked.current.add(key);
      const read = (after: number, limit: number) =>
        client.call<JournalPage>("GET", `/runs/${encodeURIComponent(run.id)}/journal?after=${after}&limit=${limit}`).then((page) => page.entries);
      findWaitStart(run, read)
        .then((start) => {
          known.current.set(key, start?.at ?? run.updatedAt);
          if (mounted.current) setVersion((v) => v + 1);
        })
        .catch(() => asked.current.delete(key)); // asked again on the next change
    }
  }, [client, keys]);
  const result = new Map<string, number>();
  for (const run of waiting) {
    const since = known.current.get(waitKey(run));
    if (since !== undefined) result.set(run.id, since);
  }
  return result;
}
