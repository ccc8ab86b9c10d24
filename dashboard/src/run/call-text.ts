import type { Json, Message, StateResponse } from "../api/types.js";
import type { CallView } from "./timeline-model.js";

/** The state message a call's result was recorded in, once the state is loaded. */
export function resultMessage(call: CallView, state: StateResponse | null): Message | undefined {
  if (call.resultInMessage === undefined || !state) return undefined;
  return state.state.messages[call.resultInMessage];
}

/** A model call's text: what streamed live, or (for calls finished before this page opened) its recorded message. */
export function modelText(call: CallView, texts: ReadonlyMap<number, string>, state: StateResponse | null): string | undefined {
  const live = texts.get(call.callSeq);
  const message = resultMessage(call, state);
  if (message && message.role === "assistant" && (live === undefined || message.content.length >= live.length)) return message.content;
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
  if (message.role === "tool") return { value: message.content, isError: message.isError === true };
  return { value: message.content, isError: false };
}

export function modelToolCalls(call: CallView, state: StateResponse | null): { toolName: string; input: Json }[] {
  const message = resultMessage(call, state);
  if (message?.role === "assistant" && message.toolCalls) return message.toolCalls;
  const result = call.result as { toolCalls?: { toolName: string; input: Json }[] } | null | undefined;
  return result && typeof result === "object" && Array.isArray(result.toolCalls) ? result.toolCalls : [];
}
