import {
  AlreadyDecidedError,
  ApprovalPendingError,
  BudgetExceededError,
  ForkInheritsEffectsError,
  HaltedError,
  IllegalTransitionError,
  InvalidInputError,
  InvalidStatePatchError,
  LeaseLostError,
  MissingDependencyError,
  ModelCallError,
  NoPendingApprovalError,
  RunHaltedError,
  RunNotFoundError,
  SnapshotCorruptError,
  StaleSnapshotError,
  StoreCorruptError,
  TetherError,
  ToolUnavailableError,
  UncertainEffectError,
  UnknownAgentError,
  UnknownModelError,
  VersionMismatchError,
  WaitTimeoutError,
  errorCodes,
  type ErrorCode,
  type ErrorDetails,
} from "../engine/errors.js";
import { ForbiddenError, PayloadTooLargeError, RouteNotFoundError, UnauthorizedError } from "../server/http-errors.js";
import { HostRefusedError, OriginRefusedError, UnsupportedMediaTypeError } from "../server/request-guard.js";

// A class whose instances carry `code`; its constructor is never called here (see receivedError).
type ErrorClass = abstract new (...args: never[]) => TetherError;

/** The class the library throws for each code that travels over HTTP; others arrive as `TetherError`. */
const classByCode: { [C in ErrorCode]?: ErrorClass | ((details: ErrorDetails[C]) => ErrorClass) } = {
  run_not_found: RunNotFoundError,
  illegal_transition: IllegalTransitionError,
  stale_snapshot: StaleSnapshotError,
  snapshot_corrupt: SnapshotCorruptError,
  invalid_state_patch: InvalidStatePatchError,
  invalid_input: InvalidInputError,
  unknown_agent: UnknownAgentError,
  unknown_model: UnknownModelError,
  uncertain_effect: UncertainEffectError,
  halted: (details) => (details && "runId" in details ? RunHaltedError : HaltedError),
  budget_exceeded: BudgetExceededError,
  already_decided: AlreadyDecidedError,
  no_pending_approval: NoPendingApprovalError,
  approval_pending: ApprovalPendingError,
  version_mismatch: VersionMismatchError,
  fork_inherits_effects: ForkInheritsEffectsError,
  lease_lost: LeaseLostError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  host_refused: HostRefusedError,
  origin_refused: OriginRefusedError,
  unsupported_media_type: UnsupportedMediaTypeError,
  payload_too_large: PayloadTooLargeError,
  model_error: ModelCallError,
  tool_unavailable: ToolUnavailableError,
  store_corrupt: StoreCorruptError,
  wait_timeout: WaitTimeoutError,
  not_found: RouteNotFoundError,
  missing_dependency: MissingDependencyError,
};

const knownCodes: ReadonlySet<string> = new Set(errorCodes);

/**
 * The error an API answer stands for, as the class the library throws for its code, with the
 * server's message and details and the HTTP `status`: `instanceof StaleSnapshotError`,
 * `err.code` and `err.details` read the same as in-process. A code this client does not know
 * (a newer server) arrives as a `TetherError` with that code.
 */
export function receivedError(code: string, message: string, details: unknown, options: { status: number; cause?: unknown }): TetherError {
  const entry = knownCodes.has(code) ? (classByCode as Record<string, ErrorClass | ((d: unknown) => ErrorClass) | undefined>)[code] : undefined;
  const errorClass = entry === undefined ? TetherError : "prototype" in entry ? (entry as ErrorClass) : (entry as (d: unknown) => ErrorClass)(details);
  // The subclasses' constructors compose the message from their parts; the server already did.
  const error = Reflect.construct(TetherError, [code, message, details ?? undefined, options], errorClass) as TetherError;
  error.name = errorClass.name;
  return error;
}
