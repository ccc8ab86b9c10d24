import type { Budgets } from "./budgets.js";
import type { Json, JsonObject } from "./json.js";
import type { LeaseHolder } from "./lease-holder.js";
import type { ControlCommandType, RunStatus } from "./status.js";
import type { Usage } from "./usage.js";

/**
 * The store contract. Every store (SQLite, Postgres, memory) implements it and passes the
 * conformance suite in `src/testing/store-conformance.ts`. The engine decides; the store only
 * applies an update atomically, checking its expectations first.
 */

export interface InflightCall {
  callSeq: number;
  kind: "model" | "tool";
  name: string;
  /** The action that planned this call, so recovery can fold in its outcome. */
  action: Json;
  startedAt: number;
  /** A person's decision on an uncertain call, applied by the next worker. */
  resolution?: { action: "retry" | "skip" | "done"; result?: Json; actor: string };
  /** Set when recovery marked the call uncertain, until a person decides. */
  uncertain?: boolean;
  /** The idempotency key, when it is not this call's own (`runId:callSeq`): a re-issue of an aborted call keeps that call's key. */
  key?: string;
}

/**
 * A call a pause (or halt, or lost lease) aborted before it finished: when the agent makes the
 * same call again (a tool with the same name and input; the next model call), the new attempt
 * is journaled under its own number but keeps this key, so a service that deduplicates on the
 * key sees one request, not two.
 */
export interface ReissuableCall {
  key: string;
  /** The aborted attempt's number. */
  callSeq: number;
  kind: "model" | "tool";
  /** A tool's name and input (`name:json`); "" for a model call. */
  signature: string;
}

export interface WaitingFor {
  kind: "tool" | "model" | "compensation" | "resource";
  name: string;
  callSeq?: number;
  since: number;
}

export interface HeldResource {
  record: Json;
  acquiredAt: number;
  /** Released for a pause; acquired again on resume. */
  releasedForPause?: boolean;
}

export interface CancelReport {
  compensated: { callSeq: number; tool: string }[];
  failed: { callSeq: number; tool: string; error: string }[];
  uncertain: { callSeq: number; tool: string; reason: string }[];
  released: string[];
  releaseFailed: { name: string; error: string }[];
  /** Effects not undone because a live fork inherited them and the cancel chose `keep` (absent in reports written before). */
  kept?: { callSeq: number; tool: string; forks: string[] }[];
}

export interface Lease {
  workerId: string;
  epoch: number;
  until: number;
  /** The process that took it, when the runtime has a `processProbe`: a restarted process on the same host takes back a dead holder's runs at once. */
  holder?: LeaseHolder;
}

export interface RunRecord {
  id: string;
  agent: string;
  agentVersion: string;
  owner: string;
  status: RunStatus;
  statusReason: string | null;
  input: Json;
  output: Json | null;
  error: { code: string; message: string } | null;
  model: string | null;
  step: number;
  nextCallSeq: number;
  usage: Usage;
  budgets: Budgets;
  /** Milliseconds spent running, summed over the run's running spells. */
  activeMs: number;
  runningSince: number | null;
  journalSeq: number;
  snapshotSeq: number;
  snapshotAt: number;
  inflight: InflightCall | null;
  /**
   * Every call in flight, when an agent may make several at once (an async-function agent's
   * gates awaited together, or a step machine's tool calls of one turn with `parallelToolCalls`);
   * `inflight` is then the oldest of them, or the one a person must decide on. Absent (or empty)
   * while a run makes one call at a time: that call is `inflight`.
   */
  inflightCalls?: InflightCall[];
  waitingFor: WaitingFor | null;
  resources: Record<string, HeldResource>;
  guard: {
    lastToolSignature: string | null;
    repeats: number;
    /** Failed tool calls in a row, and the latest of them (the evidence a `repeated_failures` pause shows). */
    failures?: number;
    recentFailures?: { callSeq: number; tool: string; error: string; message: string }[];
  };
  report: CancelReport | null;
  forkedFrom: { runId: string; step: number } | null;
  /** How a requested pause treats an in-flight model call. */
  pauseMode: "immediate" | "boundary" | null;
  /**
   * Messages a person sent to the run while it works (`say`), oldest first; the agent receives
   * those after `delivered` at its next step boundary. Absent on runs stored before it existed.
   */
  steering?: SteeringQueue;
  /**
   * Calls waiting for (or carrying) a person's decision, in call order: requested when a call
   * that needs approval is next, removed once its outcome is journaled. Absent on runs stored
   * before approvals existed.
   */
  approvals?: ApprovalRequest[];
  /**
   * Set when a process without the agent's code resumed the run (or decided its last approval):
   * it could not run the stale check, so the worker that claims the run runs it (and `onStale`)
   * before the first call. Absent or null otherwise.
   */
  uncheckedResume?: { actor: string; at: number } | null;
  /**
   * Set by a resume with `force` (who, when): the checks of a snapshot's freshness are skipped,
   * also those made while the run replays (an async-function agent's step `revalidate`). Null
   * after a resume without it.
   */
  forcedResume?: { actor: string; at: number } | null;
  /**
   * Set by a halt that stopped a run while it was `cancelling`: lifting the halt returns it to
   * `cancelling`, so the compensation a person asked for finishes. Null or absent otherwise.
   */
  haltedFrom?: "cancelling" | null;
  /** Calls aborted since the last `started`, whose key the next attempt of the same call keeps (cleared by the next `started`). */
  reissue?: ReissuableCall[] | null;
  lease: Lease | null;
  /** Incremented by every claim: the fencing token a worker's writes must carry. */
  epoch: number;
  /** Incremented by every update. */
  version: number;
  createdAt: number;
  updatedAt: number;
}

export type RunPatch = Partial<
  Pick<
    RunRecord,
    | "status"
    | "statusReason"
    | "output"
    | "error"
    | "model"
    | "step"
    | "nextCallSeq"
    | "usage"
    | "budgets"
    | "activeMs"
    | "runningSince"
    | "inflight"
    | "inflightCalls"
    | "waitingFor"
    | "resources"
    | "guard"
    | "report"
    | "pauseMode"
    | "lease"
    | "steering"
    | "approvals"
    | "uncheckedResume"
    | "forcedResume"
    | "reissue"
    | "haltedFrom"
  >
>;

export interface SteeringMessage {
  id: string;
  text: string;
  actor: string;
  at: number;
}

/** A call that needs a person's approval before it starts (approval.ts). */
export interface ApprovalRequest {
  /** The call sequence the call takes when it runs (the calls of one turn run in order). */
  callSeq: number;
  toolCallId: string;
  tool: string;
  /** The arguments the agent proposed. */
  input: Json;
  requestedAt: number;
  /** When `onTimeout` applies, or null for no deadline. */
  expiresAt: number | null;
  onTimeout: "reject" | "wait";
  /** Set once the deadline passed with `onTimeout: "wait"`: the expiry is journaled once. */
  expired?: boolean;
  decision?: ApprovalDecision;
}

export interface ApprovalDecision {
  decision: "approved" | "rejected";
  actor: string;
  at: number;
  /** The arguments a person edited the call to run with; absent when it runs as proposed (or was rejected). */
  input?: Json;
  note?: string;
}

export interface SteeringQueue {
  messages: SteeringMessage[];
  /** How many of `messages` the agent has received. */
  delivered: number;
}

export type JournalType =
  | "run.created"
  | "status"
  | "call.started"
  | "call.completed"
  | "call.failed"
  | "call.aborted"
  | "call.uncertain"
  | "call.resolved"
  | "call.progress"
  | "control"
  | "state.message_added"
  | "state.patched"
  | "compensation.started"
  | "compensation.succeeded"
  | "compensation.failed"
  | "resource.acquired"
  | "resource.released"
  | "resource.release_failed"
  | "budget.tripped"
  | "message.queued"
  | "message.delivered"
  | "recovery"
  | "webhook.delivery"
  | "approval.requested"
  | "approval.decided"
  | "approval.expired";

export interface JournalInput {
  type: JournalType;
  at: number;
  callSeq?: number;
  data: JsonObject;
}

export interface JournalEntry extends JournalInput {
  runId: string;
  seq: number;
}

/** 3: the checksum is the first 128 bits of SHA-256 (2: all 256; 1: the message chain was SHA-256, not CRC-32). */
export const snapshotSchemaVersion = 3;

/** What a step changed. Messages are append-only; `varsJson` is present only when vars changed. */
export interface SnapshotWrite {
  appendMessages: string[];
  varsJson?: string;
  head: {
    step: number;
    messageCount: number;
    /** Hex CRC-32 over every message body, in order. */
    chain: string;
    /** Hex, the first 128 bits of SHA-256 over chain, vars, step and message count. */
    checksum: string;
    schemaVersion: number;
    at: number;
  };
}

export interface SnapshotHead {
  seq: number;
  step: number;
  messageCount: number;
  chain: string;
  checksum: string;
  schemaVersion: number;
  at: number;
  varsSeq: number;
  /**
   * The journal entry that carries the snapshot (the last of its transaction): every entry up to
   * it is in this state. Optional: a store that does not say makes a fork's inheritance unknown,
   * and a cancel then treats every effect as inherited.
   */
  entrySeq?: number;
}

export interface StoredState {
  head: SnapshotHead;
  varsJson: string;
  messages: string[];
  /**
   * Set by a store that checked, as it read them, that `messages` give `head.chain` (the chain
   * is a checksum over every message body in order); the engine then does not compute it again.
   */
  verifiedChain?: string;
}

export interface CommandRecord {
  id: string;
  runId: string | null;
  type: ControlCommandType;
  actor: string;
  reason: string | null;
  payload: JsonObject;
  createdAt: number;
  appliedAt: number | null;
  outcome: string | null;
}

/** `kept`: left in place by a cancel because a live fork inherited it (`inherited: "keep"`). */
export type EffectState = "done" | "compensating" | "compensated" | "failed" | "kept";

export interface EffectRecord {
  runId: string;
  callSeq: number;
  tool: string;
  input: Json;
  result: Json;
  state: EffectState;
  attempts: number;
  error: string | null;
  updatedAt: number;
}

export type EffectWrite = Omit<EffectRecord, "runId">;

export interface HaltRecord {
  /** "*" for every run, or "agent:<name>". */
  scope: string;
  actor: string;
  reason: string | null;
  at: number;
}

export interface NewRun {
  id: string;
  agent: string;
  agentVersion: string;
  owner: string;
  status: RunStatus;
  input: Json;
  model: string | null;
  budgets: Budgets;
  forkedFrom: { runId: string; step: number } | null;
  /** The step of the initial snapshot (a fork starts at the step it was taken from). */
  step: number;
  createdAt: number;
  /**
   * Created already claimed by the worker that creates it (status `running`): its lease, fencing
   * epoch 1, as a claim's `update` would write it. One write instead of a create and a claim.
   */
  claim?: RunUpdate["claim"];
  /**
   * Refused with `halted` (`HaltedError`, naming the scope), nothing written, while a halt covers
   * the run's agent (scope `*` or `agent:<name>`; the oldest of them is named): checked in the
   * creation's own statement or transaction, so a start needs no read of the halts before it.
   */
  refuseIfHalted?: boolean;
}

export interface RunUpdate {
  runId: string;
  /** Nothing is written unless every expectation holds. */
  expect?: {
    status?: readonly RunStatus[];
    epoch?: number;
    version?: number;
    /** The run holds no live lease at `now`, or `workerId` holds it. */
    leaseFree?: { now: number; workerId: string };
  };
  set?: RunPatch;
  /** Take the lease: the epoch is incremented and the lease set to this worker. */
  claim?: { workerId: string; until: number; holder?: LeaseHolder };
  /**
   * Extend the lease to `until` if this worker still holds it once `set` is applied; otherwise
   * nothing (a renewal never brings back a lease a pause or an end let go).
   */
  renewLease?: { workerId: string; until: number };
  journal?: JournalInput[];
  /**
   * Written only with at least one journal entry, the change it records (a store may keep the
   * snapshot head on that entry); without one the update is refused with `invalid_input`.
   */
  snapshot?: SnapshotWrite;
  effects?: EffectWrite[];
  insertCommand?: CommandRecord;
  /**
   * Settles the run's pending commands with the update, in its transaction: every command of the
   * run not yet applied whose type is a key of `outcomes` is marked applied at `at` with that
   * outcome (the move it asked for happened, or a stronger one made it moot). Nothing is read
   * first, so a command recorded up to the moment the update commits is settled with it.
   */
  settleCommands?: CommandSettlement;
}

/** See `RunUpdate.settleCommands`. */
export interface CommandSettlement {
  at: number;
  outcomes: Partial<Record<ControlCommandType, string>>;
}

export type UpdateResult = { ok: true; run: RunRecord; journal: JournalEntry[] } | { ok: false; run: RunRecord };

export interface RunFilter {
  status?: readonly RunStatus[];
  /** Runs whose status reason is exactly this (such as `approval_required`). */
  statusReason?: string;
  agent?: string;
  limit?: number;
  /** Runs updated after this time (for change feeds): listed oldest change first, instead of newest created first. */
  updatedAfter?: number;
}

/** A run as a listing of ids names it. */
export interface RunRef {
  id: string;
  agent: string;
}

/**
 * A run a listing passed over: its row is there, but its record fails its checksum. Named from
 * the row's own columns; nothing of it was changed or deleted (`tether verify` names the damage).
 */
export interface DamagedRun extends RunRef {
  /** The status in the row's own column (the record itself cannot be trusted). */
  status: string;
  code: "store_corrupt";
  message: string;
}

/** What a run takes in the store: its rows and their bytes (the data, not the database's own overhead). */
export interface RunStorage {
  journalEntries: number;
  messages: number;
  effects: number;
  commands: number;
  /** Bytes of journal entries (data, snapshot heads, vars), messages, effects and commands. */
  bytes: number;
}

export interface PruneOptions {
  /** Only terminal runs (completed, failed, cancelled) last updated before this time. */
  before: number;
  /** Runs deleted per transaction; other work goes on between batches. Default 200. */
  batchSize?: number;
  /** Count what would be removed, remove nothing. */
  dryRun?: boolean;
}

/** What a prune removed (or, dry, would remove). */
export interface PruneReport {
  runs: number;
  journalEntries: number;
  messages: number;
  bytes: number;
  batches: number;
}

export interface ApiTokenRecord {
  id: string;
  name: string;
  role: "viewer" | "operator" | "admin";
  hash: string;
  createdAt: number;
  revokedAt: number | null;
}

export interface Store {
  readonly kind: string;

  createRun(run: NewRun, initial: SnapshotWrite, journal: JournalInput[]): Promise<RunRecord>;
  getRun(runId: string): Promise<RunRecord | undefined>;
  /**
   * The runs that match, newest first. A row whose record fails its checksum is passed over, as
   * `findClaimable` passes it over: one damaged run must not hide every other run from a listing,
   * nor stop a sweep (orphan recovery, approval deadlines) from reaching them. It is named in
   * `damaged` when the caller gives that array; reading it alone (`getRun`) is refused.
   */
  listRuns(filter?: RunFilter, damaged?: DamagedRun[]): Promise<RunRecord[]>;
  /**
   * The id and agent of each run `listRuns` would return, in its order, read from the row's own
   * columns without its record: a run whose record is damaged is listed too (the kill switch
   * halts every other run and names it).
   */
  listRunRefs(filter?: RunFilter): Promise<RunRef[]>;
  /** Atomic: check expectations, then apply every part of the update, or nothing. */
  update(update: RunUpdate): Promise<UpdateResult>;

  readJournal(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<JournalEntry[]>;
  /** The latest snapshot, or the newest one at or before `step`. */
  loadState(runId: string, options?: { atStep?: number }): Promise<StoredState>;
  /** Single message bodies by index (for journal entries that point into the state). */
  readMessages(runId: string, indexes: readonly number[]): Promise<Map<number, string>>;

  insertCommand(command: CommandRecord): Promise<void>;
  listCommands(runId: string): Promise<CommandRecord[]>;
  listEffects(runId: string): Promise<EffectRecord[]>;

  listHalts(): Promise<HaltRecord[]>;
  setHalt(halt: HaltRecord): Promise<void>;
  clearHalt(scope: string): Promise<boolean>;

  /** Runs a worker may take: queued, or active with no live lease. */
  findClaimable(now: number, limit: number): Promise<RunRecord[]>;

  /**
   * Optional: claims up to `limit` runs `findClaimable` would return, in one transaction that
   * locks them and skips any another worker is claiming at that moment (PostgreSQL's
   * `FOR UPDATE SKIP LOCKED`), so workers looking together get different runs. `plan` turns each
   * into its claiming update (undefined leaves it), applied as `update` would, given the halts in
   * force (read only when there is a run to claim: a look that finds none costs one statement).
   */
  claimRuns?(now: number, limit: number, plan: (run: RunRecord, halts: readonly HaltRecord[]) => Omit<RunUpdate, "runId"> | undefined): Promise<UpdateResult[]>;

  /** The run's rows and bytes in the store; undefined for an unknown run. */
  runStorage(runId: string): Promise<RunStorage | undefined>;
  /**
   * Deletes terminal runs last updated before `before` with everything they own, in batches that
   * each commit on their own; never touches a run that is not terminal.
   */
  prune(options: PruneOptions): Promise<PruneReport>;

  saveToken(token: ApiTokenRecord): Promise<void>;
  findTokenByHash(hash: string): Promise<ApiTokenRecord | undefined>;
  listTokens(): Promise<ApiTokenRecord[]>;
  /**
   * Revokes token `id` at `at` (its row stays, so its commands keep their actor): the record as it
   * is then, its `revokedAt` the first revocation's if it was revoked already; undefined for an
   * unknown id.
   */
  revokeToken(id: string, at: number): Promise<ApiTokenRecord | undefined>;

  /**
   * Optional: a value that changes whenever anything may have been written to the store since
   * it was last read, by this connection or any other.
   */
  changeMarker?(): string;

  /**
   * Optional: calls `onChange` with a run's id after a write to it that its executing worker did
   * not make (a control command, a claim), through this store object or any other connection or
   * process; with `"*"` when something may have changed that the store cannot name. A worker's
   * watcher reads only the runs named, so control reaches executing runs without a poll per run;
   * where the store has the run's new record without a read (PostgreSQL's notification carries
   * it), it comes as `record` and the watcher reads nothing. Resolves once changes are being
   * watched; the function it resolves to stops watching.
   */
  watchRuns?(onChange: (runId: string, record?: RunRecord) => void): Promise<() => void>;

  /**
   * Optional: the records of these runs that exist, read together (one round trip where the store
   * can), ahead of the steps waiting where the store has a lane for control (PostgreSQL). A
   * worker's watcher reads the runs `watchRuns` named with it, and a control command the run it
   * decides on; without it, `getRun` each.
   */
  getRuns?(runIds: readonly string[]): Promise<RunRecord[]>;

  /** Optional, cheap: the stored `version` of each of these runs that exists. */
  runVersions?(runIds: readonly string[]): Promise<Map<string, number>>;

  close(): Promise<void>;
}
