import type { Json, Message, StateResponse } from "../api/types.js";
import type { CallView } from "./timeline-model.js";

/** The state message a call's result was recorded in, once the state is loaded. */
export function resultMessage(call: CallView, state: StateResponse | null): Message | undefined {
  if (call.resultInMessage === undefined || !state) return undefined;
  return state.state.messages[call.resultInMessage];
}

/**
 * An async-function agent keeps each call's result in a gate record (a tool-role message whose id
 * starts `gate:`): `{ seq, kind, hash, value }` or `{ …, error }`.
 */
function gateRecord(message: Message | undefined): { value?: Json; error?: Json } | undefined {
  if (!message || message.role !== "tool" || !message.toolCallId.startsWith("gate:")) return undefined;
  return message.content as { value?: Json; error?: Json };
}

/** The text of a model call's gate record: Tether's model result, or an AI SDK stream's parts or generate result. */
function gateText(value: Json | undefined): string | undefined {
  if (Array.isArray(value)) {
    return value.map((p) => (p && typeof p === "object" && !Array.isArray(p) && p.type === "text-delta" && typeof p.delta === "string" ? p.delta : "")).join("");
  }
  if (!value || typeof value !== "object") return undefined;
  if (typeof value.text === "string") return value.text;
  if (Array.isArray(value.content)) return gateText(value.content.map((c) => (c && typeof c === "object" && !Array.isArray(c) && c.type === "text" ? { type: "text-delta", delta: c.text ?? "" } : null)));
  return undefined;
}

/** A model call's text: what streamed live, or (for calls finished before this page opened) its recorded message. */
export function modelText(call: CallView, texts: ReadonlyMap<number, string>, state: StateResponse | null): string | undefined {
  const live = texts.get(call.callSeq);
  const message = resultMessage(call, state);
  if (message && message.role === "assistant" && (live === undefined || message.content.length >= live.length)) return message.content;
  const gated = gateText(gateRecord(message)?.value);
  if (gated !== undefined && (live === undefined || gated.length >= live.length)) return gated;
  if (live !== undefined) return live;
  const result = call.result as { text?: Json } | null | undefined;
  if (result && typeof result === "object" && typeof result.text === "string") return result.text;
  // An aborted call: the text it had streamed when it stopped, as journaled.
  if (call.partialText !== undefined) return call.partialTextTruncated ? `… ${call.partialText}` : call.partialText;
  return undefined;
}

/** A tool call's result: inline in the journal, or the content of its state message. */
export function toolResult(call: CallView, state: StateResponse | null): { value: Json; isError: boolean } | "loading" | undefined {
  if (call.result !== undefined) return { value: call.result, isError: call.outcome === "failed" };
  if (call.resultInMessage === undefined) return undefined;
  const message = resultMessage(call, state);
  if (!message) return "loading";
  const gate = gateRecord(message);
  if (gate) return gate.error !== undefined ? { value: gate.error, isError: true } : { value: gate.value ?? null, isError: false };
  if (message.role === "tool") return { value: message.content, isError: message.isError === true };
  return { value: message.content, isError: false };
}

export function modelToolCalls(call: CallView, state: StateResponse | null): { toolName: string; input: Json }[] {
  const message = resultMessage(call, state);
  if (message?.role === "assistant" && message.toolCalls) return message.toolCalls;
  const gated = gateRecord(message)?.value as { toolCalls?: { toolName: string; input: Json }[] } | null | undefined;
  if (gated && typeof gated === "object" && Array.isArray(gated.toolCalls)) return gated.toolCalls;
  const result = call.result as { toolCalls?: { toolName: string; input: Json }[] } | null | undefined;
  return result && typeof result === "object" && Array.isArray(result.toolCalls) ? result.toolCalls : [];
}
