import type { Json, JsonObject } from "./json.js";

export interface ToolCallPart {
  toolCallId: string;
  toolName: string;
  input: Json;
}

export type Message =
  | { role: "system"; content: string }
  | { role: "user"; content: string; author?: string }
  | { role: "assistant"; content: string; toolCalls?: ToolCallPart[] }
  | { role: "tool"; toolCallId: string; toolName: string; content: Json; isError?: boolean };

/**
 * The durable state of an agent at a step boundary. Messages are append-only between human
 * edits, so a snapshot only writes the messages a step added; `vars` is a small object that is
 * written again only when it changed. Keep large data in messages, not in vars.
 */
export interface AgentState {
  messages: Message[];
  vars: JsonObject;
}

export function cloneState(state: AgentState): AgentState {
  return { messages: state.messages.slice(), vars: structuredClone(state.vars) };
}
