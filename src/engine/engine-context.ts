import type { AgentDefinition } from "./agent.js";
import type { Clock } from "./clock.js";
import type { EventBus } from "./events.js";
import type { IdGenerator } from "./ids.js";
import type { ProcessProbe } from "./lease-holder.js";
import type { TetherModel } from "./model.js";
import type { PriceTable } from "./pricing.js";
import type { SnapshotHandoff } from "./snapshot-handoff.js";
import type { Store } from "./store.js";

export type ModelResolver = (spec: string | TetherModel | undefined) => TetherModel;

export interface CompensationPolicy {
  /** Attempts per compensation before it is reported failed. */
  maxAttempts: number;
  /** Backoff before attempt n is `backoffMs * 2^(n-2)`. */
  backoffMs: number;
  /** Time bound of one attempt. */
  timeoutMs: number;
}

/** What the executor and the control functions share; built once by the runtime. */
export interface EngineContext {
  store: Store;
  clock: Clock;
  ids: IdGenerator;
  bus: EventBus;
  prices: PriceTable;
  resolveModel: ModelResolver;
  agents: ReadonlyMap<string, AgentDefinition>;
  workerId: string;
  leaseMs: number;
  /** Names this process in its leases and tells whether another lease's process has exited (lease-holder.ts). */
  processProbe?: ProcessProbe;
  controlPollMs: number;
  compensation: CompensationPolicy;
  /** An approval this process asked for has a deadline at `at`: a worker applies it then (approval-deadlines.ts). */
  approvalDeadline(runId: string, at: number): void;
  /** Snapshots a resume just read, for the executor this process starts next (read once, not twice). */
  snapshots: SnapshotHandoff;
  /** Replaces known secret values in text from the outside world (a tool's error) before it enters a run. */
  redact(text: string): string;
}
