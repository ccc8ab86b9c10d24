import { crc32 } from "node:zlib";
import type { Json, JsonObject } from "./json.js";
import type { AgentState, Message } from "./state.js";

/** What a gate of an async-function agent is: a call, or a value that must replay (`now`, `random`). */
export type GateKind = "model" | "tool" | "step" | "now" | "random";

/**
 * A gate's journaled result, kept in the run's snapshot as one message: the gate's position in
 * program order (its idempotency key's number), what it was (kind, name, a hash of its input,
 * compared on replay) and its value or error. Resume reads them back with the snapshot, so
 * replay costs what reading the snapshot costs.
 */
export interface GateRecord {
  seq: number;
  kind: GateKind;
  name: string;
  hash: string;
  value?: Json;
  error?: { code: string; message: string };
}

const gateIdPrefix = "gate:";

/** The snapshot message that holds a gate's record. */
export function gateMessage(record: GateRecord): Message {
  const content: JsonObject = { seq: record.seq, kind: record.kind, hash: record.hash };
  if (record.error) content.error = record.error;
  else content.value = record.value ?? null;
  return record.error
    ? { role: "tool", toolCallId: `${gateIdPrefix}${record.seq}`, toolName: record.name, content, isError: true }
    : { role: "tool", toolCallId: `${gateIdPrefix}${record.seq}`, toolName: record.name, content };
}

/** A hash of what a gate depends on, to notice code that calls something else on replay. */
export function inputHash(input: Json | undefined): string {
  if (input === undefined) return "";
  return crc32(JSON.stringify(input)).toString(16).padStart(8, "0");
}

/** The journaled gate results of a run, by position. */
export class ReplayLog {
  private readonly bySeq = new Map<number, GateRecord>();

  static fromState(state: AgentState): ReplayLog {
    const log = new ReplayLog();
    for (const message of state.messages) {
      if (message.role !== "tool" || !message.toolCallId.startsWith(gateIdPrefix)) continue;
      const content = message.content as { seq: number; kind: GateKind; hash: string; value?: Json; error?: { code: string; message: string } };
      log.bySeq.set(content.seq, { seq: content.seq, kind: content.kind, name: message.toolName, hash: content.hash, value: content.value, error: content.error });
    }
    return log;
  }

  get(seq: number): GateRecord | undefined {
    return this.bySeq.get(seq);
  }

  add(record: GateRecord): void {
    this.bySeq.set(record.seq, record);
  }

  get size(): number {
    return this.bySeq.size;
  }
}

/** How a replayed gate differs from the journal at its position, for a person to read. */
export function divergence(seq: number, journaled: GateRecord, now: { kind: GateKind; name: string; hash: string }): string {
  const what = (g: { kind: GateKind; name: string; hash: string }) => `${g.kind} "${g.name}"${g.hash ? ` (input ${g.hash})` : ""}`;
  return `nondeterministic_replay: gate ${seq} is ${what(journaled)} in the journal, but the agent's code now calls ${what(now)}`;
}
