/**
 * The wire shapes the dashboard reads, taken from the server's own definitions so a change of
 * the API shows up here as a type error. Type-only: nothing of the server is bundled.
 */
export type {
  AgentInfo,
  CancelPreviewResponse,
  DecisionResponse,
  DeltaData,
  ErrorBody,
  HaltResponse,
  HaltsResponse,
  JournalPage,
  ResolveAction,
  Role,
  RunView,
  RunsResponse,
  StateResponse,
  UnhaltResponse,
} from "../../../src/server/api-types.js";
export type { Budgets } from "../../../src/engine/budgets.js";
export type { Json, JsonObject } from "../../../src/engine/json.js";
export type { AgentState, Message } from "../../../src/engine/state.js";
export type { RunStatus } from "../../../src/engine/status.js";
export type { ApprovalRequest, CancelReport, DamagedRun, HaltRecord, JournalEntry, JournalType, WaitingFor } from "../../../src/engine/store.js";
export type { Usage } from "../../../src/engine/usage.js";

/** `GET /api/v1/whoami`, when the server has it. */
export interface WhoamiResponse {
  name: string;
  role: import("../../../src/server/api-types.js").Role;
}
