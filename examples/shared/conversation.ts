import type { Json } from "../../src/engine/json.js";
import type { Message } from "../../src/engine/state.js";

/** One tool call of the conversation joined with its result (if it has one yet). */
export interface ToolExchange {
  toolCallId: string;
  toolName: string;
  input: Json;
  /** Index of the assistant message that made the call. */
  turnIndex: number;
  done: boolean;
  ok: boolean;
  output: Json;
}

/** Every tool call in the conversation, in order, with its result. Scripts decide from this. */
export function toolExchanges(messages: readonly Message[]): ToolExchange[] {
  const results = new Map<string, Extract<Message, { role: "tool" }>>();
  for (const message of messages) if (message.role === "tool") results.set(message.toolCallId, message);
  const exchanges: ToolExchange[] = [];
  messages.forEach((message, turnIndex) => {
    if (message.role !== "assistant") return;
    for (const call of message.toolCalls ?? []) {
      const result = results.get(call.toolCallId);
      exchanges.push({
        toolCallId: call.toolCallId,
        toolName: call.toolName,
        input: call.input,
        turnIndex,
        done: result !== undefined,
        ok: result !== undefined && !result.isError,
        output: result?.content ?? null,
      });
    }
  });
  return exchanges;
}

/** The task: the first user message. */
export function taskOf(messages: readonly Message[]): string {
  const first = messages.find((m) => m.role === "user");
  return first ? String(first.content) : "";
}

/** What a person added while the run was paused: user messages after the task, not yet answered. */
export function newSteering(messages: readonly Message[]): string[] {
  const notes: string[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role === "assistant") break;
    if (message.role === "user" && messages.some((m, j) => j < i && m.role === "user")) notes.unshift(String(message.content));
  }
  return notes;
}

/** Every steering note a person has added so far. */
export function allSteering(messages: readonly Message[]): string[] {
  return messages.filter((m) => m.role === "user").slice(1).map((m) => String(m.content));
}

export function field(value: Json, key: string): Json | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value[key] : undefined;
}

export function text(value: Json | undefined): string {
  return typeof value === "string" ? value : "";
}
