import type { RunRecord } from "../engine/store.js";
import type { PersonWait, PersonWaitReason } from "../engine/waiting.js";

/** The JSON body of a `run.waiting` webhook (docs/webhooks.md). The same bytes on every attempt. */
export interface RunWaitingPayload {
  /** One wait of one run: `<run id>.<seq of the status entry that began it>`. Deduplicate on it. */
  id: string;
  type: "run.waiting";
  run: { id: string; agent: string; agentVersion: string; owner: string; status: RunRecord["status"]; step: number };
  reason: PersonWaitReason;
  /** The run's status reason as written, e.g. `budget_steps: 60 of 60 steps`. */
  detail: string;
  /** When the wait began (ISO 8601), and the journal entry that records it. */
  since: string;
  waitSeq: number;
  /** Where a person acts: the run in the dashboard, and the API's control endpoints (POST, operator token). */
  links: { dashboard: string; resume: string; cancel: string; approve?: string; reject?: string };
}

export function runWaitingPayload(run: RunRecord, wait: PersonWait, start: { seq: number; at: number }, publicUrl: string): RunWaitingPayload {
  const base = publicUrl.replace(/\/+$/, "");
  const id = encodeURIComponent(run.id);
  const api = `${base}/api/v1/runs/${id}`;
  return {
    id: `${run.id}.${start.seq}`,
    type: "run.waiting",
    run: { id: run.id, agent: run.agent, agentVersion: run.agentVersion, owner: run.owner, status: run.status, step: run.step },
    reason: wait.reason,
    detail: wait.detail,
    since: new Date(start.at).toISOString(),
    waitSeq: start.seq,
    links: {
      dashboard: `${base}/runs/${id}`,
      resume: `${api}/resume`,
      cancel: `${api}/cancel`,
      ...(wait.reason === "approval_required" ? { approve: `${api}/approve`, reject: `${api}/reject` } : {}),
    },
  };
}
