/**
 * What each error code carries in `details`, the same whether the library threw it or the HTTP
 * client received it (`{"error":{"code","message","details"}}`). docs/errors.md has the table.
 */

/** One problem with a value: where (`a.b.0`, empty for the value itself) and what. */
export interface InputIssue {
  path: string;
  message: string;
}

/** What a live fork relies on: the fork, the step of the cancelled run it came from, and the effects of that run it inherited. */
export interface InheritingForkDetail {
  runId: string;
  status: string;
  fromStep: number;
  effects: number[];
}

/** An effect of a run that a live fork inherited. */
export interface InheritedEffectDetail {
  callSeq: number;
  tool: string;
  forks: string[];
}

export interface ErrorDetails {
  run_not_found: { runId: string };
  illegal_transition: { runId: string; command: string; currentStatus: string };
  stale_snapshot: { runId: string; reasons: string[] };
  snapshot_corrupt: { runId: string; problem: string };
  invalid_state_patch: { issues: InputIssue[] } | undefined;
  invalid_input: { issues: InputIssue[] } | undefined;
  unknown_agent: { name: string; known: string[]; source?: string };
  unknown_model: { spec: string; providers: string[] };
  /** A call's outcome, never thrown: the journal's `tool.failed` rows carry it. */
  unknown_tool: undefined;
  uncertain_effect: { runId: string; callSeq: number; toolName: string };
  /** A start refused by a halt in force (`scope`), or a command on a halted run (`runId`). */
  halted: { scope: string } | { runId: string; command: string; currentStatus: "halted" };
  budget_exceeded: { runId: string; budget: string };
  already_decided: { runId: string; callSeq: number; decision: string; actor: string };
  no_pending_approval: { runId: string; callSeq?: number; pending: number[]; status?: string };
  approval_pending: { runId: string; pending: { callSeq: number; tool: string }[] };
  version_mismatch: { runId: string; agent: string; runVersion: string; currentVersion: string };
  fork_inherits_effects: { runId: string; forks: InheritingForkDetail[]; effects: InheritedEffectDetail[] };
  lease_lost: { runId: string };
  unauthorized: undefined;
  forbidden: undefined;
  host_refused: { host: string };
  origin_refused: { origin: string };
  unsupported_media_type: { contentType: string | null };
  /** `host`: the address a server with no token was asked to listen on. */
  auth_not_configured: { host: string } | undefined;
  tokens_missing: { missing: string[] };
  payload_too_large: { maxBytes: number };
  /** Known fields, and whatever else a model adapter adds. */
  /** `beforeAnswer`: refused before any response stream opened (nothing billed). */
  model_error: { model?: string; beforeAnswer?: boolean; statusCode?: number; retryable?: boolean; retryAfterSeconds?: number; [key: string]: unknown } | undefined;
  /** A tool's own errors may carry more (a subclass of `TetherError` in your tool). */
  tool_error: { toolName?: string; [key: string]: unknown } | undefined;
  tool_unavailable: { toolName?: string; [key: string]: unknown };
  store_error: undefined;
  store_too_new: undefined;
  store_corrupt: { location: string; problem: string; [key: string]: unknown };
  store_limit: undefined;
  wait_timeout: { runId: string; timeoutMs: number; status: string };
  not_found: { method: string; path: string };
  missing_dependency: { package: string; feature: string; install: string };
  /** The server failed in a way that is no error of Tether's (a bug): the message says how. */
  internal_error: undefined;
  /** The HTTP client could not reach the server, or its event stream kept dropping. */
  unreachable: { baseUrl: string };
  /** The HTTP client got an answer that is not the API's (a proxy's error page). */
  http_error: { status: number };
}
