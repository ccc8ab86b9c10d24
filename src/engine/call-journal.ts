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
/** At most this much of an aborted model call's text is journaled (its end: what the model was saying when it stopped). */
export const maxPartialTextChars = 8_192;

/** The text an aborted model call streamed, bounded: the last `maxPartialTextChars` characters, flagged when cut. */
export function partialText(text: string): { partialText?: string; partialTextTruncated?: boolean } {
  if (text.length === 0) return {};
  return text.length > maxPartialTextChars ? { partialText: text.slice(-maxPartialTextChars), partialTextTruncated: true } : { partialText: text };
}
