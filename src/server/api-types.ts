import type { Budgets } from "../engine/budgets.js";
import type { RunFailure } from "../engine/halt-command.js";
import type { Json, JsonObject } from "../engine/json.js";
import type { CancelPreview } from "../engine/runtime.js";
import type { AgentState } from "../engine/state.js";
import type { RunStatus } from "../engine/status.js";
import type { ApiTokenRecord, ApprovalRequest, DamagedRun, HaltRecord, JournalEntry, PruneReport, RunRecord, RunStorage } from "../engine/store.js";
import type { WorkerWait } from "../engine/worker-wait.js";

/** The wire shapes of the HTTP API (docs/http-api.md), shared by the server and the typed client. */

export type Role = ApiTokenRecord["role"];

export const roles: readonly Role[] = ["viewer", "operator", "admin"];

export interface PendingCompensation {
  callSeq: number;
  tool: string;
  input: Json;
}

/** The stored run record, plus what a person needs to decide: what a cancel would undo, how long a pause has waited. */
export interface RunView extends RunRecord {
  /** Effects a cancel would compensate now, newest first (empty once the run is terminal). */
  pendingCompensations: PendingCompensation[];
  /** Milliseconds a pausing (or cancelling) run has been waiting on an in-flight call, else null. */
  waitingForMs: number | null;
  /** Set when the run needs a worker and none has held it for a few seconds (queued or resumed, not claimed; or orphaned). */
  waitingForWorker: WorkerWait | null;
}

export interface ToolInfo {
  name: string;
  description: string;
  compensates: boolean;
  idempotent: boolean;
  abortable: boolean;
}

export interface AgentInfo {
  name: string;
  version: string;
  description: string | null;
  tools: ToolInfo[];
  resources: { name: string; releaseOnPause: boolean }[];
}

export interface HealthResponse {
  ok: boolean;
  store: string;
  version: string;
}

export interface StartRunBody {
  agent: string;
  input: Json;
  budgets?: Budgets;
  model?: string;
}

export interface ListRunsQuery {
  status?: readonly RunStatus[];
  agent?: string;
  limit?: number;
}

export interface JournalPage {
  entries: JournalEntry[];
  /** Pass as `after` to read the next page; null when this page reached the end. */
  next: number | null;
}

export interface StateResponse {
  state: AgentState;
  snapshotAt: number;
  step: number;
}

export type CancelPreviewResponse = CancelPreview;

export interface PauseBody {
  reason?: string;
  mode?: "immediate" | "boundary";
}

export type ResolveAction = "retry" | "skip" | "done";

export interface ResumeBody {
  reason?: string;
  message?: string;
  patch?: unknown;
  force?: boolean;
  resolve?: ResolveAction | { action: ResolveAction; result?: Json; noResult?: boolean };
  budgets?: Budgets;
}

export interface ApproveBody {
  /** The call to approve; without it, every call waiting for approval. */
  callSeq?: number;
  /** Run the call with these arguments instead of the proposed ones. */
  input?: Json;
  note?: string;
}

export interface RejectBody {
  /** The call to reject; without it, every call waiting for approval. */
  callSeq?: number;
  /** Why: the agent receives it as the call's result. */
  note: string;
}

/** A decision's answer: the run, and the calls the decision applied to. */
export interface DecisionResponse {
  run: RunView;
  decided: ApprovalRequest[];
}

export interface CancelBody {
  reason?: string;
  /** What to do with effects a live fork inherited: `compensate` them anyway, or `keep` them for the forks (otherwise `fork_inherits_effects`). */
  inherited?: "compensate" | "keep";
}

export interface EditStateBody {
  message?: string;
  patch?: unknown;
}

export interface ForkBody {
  fromStep: number;
  /** Move a run started under an incompatible version of the agent onto the server's version (otherwise `version_mismatch`). */
  currentVersion?: boolean;
}

export interface StorageResponse {
  storage: RunStorage;
}

export interface PruneBody {
  /** Terminal runs last updated more than this many ms ago; or `before`. */
  olderThanMs?: number;
  /** Terminal runs last updated before this time (ms since the epoch). */
  before?: number;
  dryRun?: boolean;
  batchSize?: number;
}

export interface PruneResponse extends PruneReport {
  /** The bound applied (ms since the epoch). */
  before: number;
  dryRun: boolean;
}

export interface HaltBody {
  reason: string;
  agent?: string;
}

export interface HaltsResponse {
  halts: HaltRecord[];
  runs: RunView[];
  /** Halted runs whose record is damaged (`store_corrupt`), named from their rows' own columns; `runs` lists the others. */
  damaged: DamagedRun[];
}

/** `GET /runs`: the runs that match, newest first, and those of them whose record is damaged. */
export interface RunsResponse {
  runs: RunView[];
  /** Matching runs whose record fails its checksum (`store_corrupt`), named from their rows' own columns; nothing of them was changed, and `runs` lists every other one. */
  damaged: DamagedRun[];
}

export interface HaltResponse {
  scope: string;
  halted: string[];
  /** Runs in scope the halt could not stop (a damaged record), each with the error's code and message; every other run was halted. */
  failed: RunFailure[];
}

export interface UnhaltResponse {
  scope: string;
  /** Halted runs now paused. */
  paused: string[];
  /** Runs the halt stopped while they were being cancelled: cancelling again, their compensation goes on. */
  cancelling: string[];
  /** Halted runs that could not be changed (a damaged record): still halted, each with why. */
  failed: RunFailure[];
}

export interface ErrorBody {
  error: { code: string; message: string; details?: JsonObject };
}

/** `event: delta` data on a run's event stream. */
export interface DeltaData {
  callSeq: number;
  text: string;
  /** The characters of the call's text streamed before this delta: over 0 on the first delta a follower gets when it joined mid-call. */
  offset: number;
}
