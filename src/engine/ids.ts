import { randomBytes } from "node:crypto";

export type IdGenerator = (prefix: string) => string;

export const randomIds: IdGenerator = (prefix) => `${prefix}_${randomBytes(8).toString("hex")}`;

/** The idempotency key of a call: deterministic from the run and the call's sequence number. */
export function idempotencyKey(runId: string, callSeq: number): string {
  return `${runId}:${callSeq}`;
}
