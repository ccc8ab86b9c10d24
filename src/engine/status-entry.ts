import type { JsonObject } from "./json.js";
import type { RunStatus } from "./status.js";
import type { JournalInput } from "./store.js";

/** The journal entry for a run's status changing from one value to another, with the reason and any detail. */
export function statusEntry(at: number, from: RunStatus, to: RunStatus, reason?: string | null, extra: JsonObject = {}): JournalInput {
  return { type: "status", at, data: { from, to, ...(reason ? { reason } : {}), ...extra } };
}
