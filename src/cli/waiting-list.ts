import type { TetherClient } from "../client/tether-client.js";
import type { DamagedRun } from "../engine/store.js";
import { findWaitStart, waitingForPerson, type PersonWait } from "../engine/waiting.js";
import type { RunView } from "../server/api-types.js";
import { formatDuration, table } from "./format.js";

export interface WaitingRun {
  run: RunView;
  wait: PersonWait;
  /** When the wait began (the status entry into paused or halted). */
  since: number;
}

/** Runs waiting for a person (`waitingForPerson`), oldest wait first: `tether ls --waiting`. */
export async function waitingRuns(client: TetherClient, options: { agent?: string; limit: number }, damaged?: DamagedRun[]): Promise<WaitingRun[]> {
  // The API lists at most 1000 runs a call, newest first.
  const candidates = await client.list({ status: ["paused", "halted"], agent: options.agent, limit: 1000 }, damaged);
  const rows: WaitingRun[] = [];
  for (const run of candidates) {
    const wait = waitingForPerson(run);
    if (!wait) continue;
    const start = await findWaitStart(run, async (after, limit) => (await client.journal(run.id, { after, limit })).entries);
    rows.push({ run, wait, since: start?.at ?? run.updatedAt });
  }
  return rows.sort((a, b) => a.since - b.since || a.run.id.localeCompare(b.run.id)).slice(0, options.limit);
}

export function waitingTable(rows: readonly WaitingRun[], now: number): string {
  if (rows.length === 0) return "no run waits for a person";
  return table(
    ["RUN", "AGENT", "REASON", "WAITING", "DETAIL"],
    rows.map(({ run, wait, since }) => [run.id, run.agent, wait.reason, formatDuration(Math.max(0, now - since)), wait.detail === wait.reason ? "" : wait.detail]),
  );
}
