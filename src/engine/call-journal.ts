import type { JsonObject } from "./json.js";
import type { JournalInput } from "./store.js";

/**
 * The journal entries of one call's life: `call.started` before it, then one of `call.completed`,
 * `call.failed`, `call.aborted` or `call.uncertain`; `call.progress` while it runs.
 */
export type CallEntryType = "call.started" | "call.progress" | "call.completed" | "call.failed" | "call.aborted" | "call.uncertain";

export function callEntry(type: CallEntryType, at: number, callSeq: number, data: JsonObject): JournalInput {
  return { type, at, callSeq, data } as JournalInput;
}

/** How much of an aborted model stream's text is kept with its `call.aborted` entry. */
export const PARTIAL_TEXT_LIMIT = 8 * 1024;

/** The text a model streamed before it was aborted, bounded to PARTIAL_TEXT_LIMIT characters. */
export function partialText(text: string): { partialText: string; partialTextTruncated?: true } {
  return text.length > PARTIAL_TEXT_LIMIT ? { partialText: text.slice(0, PARTIAL_TEXT_LIMIT), partialTextTruncated: true } : { partialText: text };
}
