import type { ApiTokenRecord, CommandRecord, EffectRecord } from "../engine/store.js";

/** The rows of the tables both stores share (commands, effects, tokens), and the records they hold. */

export interface CommandRow {
  id: string;
  run_id: string | null;
  type: string;
  actor: string;
  reason: string | null;
  payload: string;
  created_at: number;
  applied_at: number | null;
  outcome: string | null;
}

export interface EffectRow {
  call_seq: number;
  tool: string;
  input: string;
  result: string;
  state: string;
  attempts: number;
  error: string | null;
  updated_at: number;
}

export interface TokenRow {
  id: string;
  name: string;
  role: ApiTokenRecord["role"];
  hash: string;
  created_at: number;
  revoked_at: number | null;
}

export function commandFromRow(row: CommandRow): CommandRecord {
  return {
    id: row.id,
    runId: row.run_id,
    type: row.type as CommandRecord["type"],
    actor: row.actor,
    reason: row.reason,
    payload: JSON.parse(row.payload),
    createdAt: row.created_at,
    appliedAt: row.applied_at,
    outcome: row.outcome,
  };
}

export function effectFromRow(runId: string, row: EffectRow): EffectRecord {
  return {
    runId,
    callSeq: row.call_seq,
    tool: row.tool,
    input: JSON.parse(row.input),
    result: JSON.parse(row.result),
    state: row.state as EffectRecord["state"],
    attempts: row.attempts,
    error: row.error,
    updatedAt: row.updated_at,
  };
}

export function tokenFromRow(row: TokenRow): ApiTokenRecord {
  return { id: row.id, name: row.name, role: row.role, hash: row.hash, createdAt: row.created_at, revokedAt: row.revoked_at };
}
