import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { TetherError, type ErrorCode } from "../engine/errors.js";
import type { ErrorBody } from "./api-types.js";

/** How each error code travels out over HTTP; anything unlisted is the server's fault (500). */
const statusByCode: Partial<Record<ErrorCode, ContentfulStatusCode>> = {
  invalid_input: 400,
  invalid_state_patch: 400,
  unknown_model: 400,
  unknown_tool: 400,
  unauthorized: 401,
  forbidden: 403,
  host_refused: 403,
  origin_refused: 403,
  unsupported_media_type: 415,
  run_not_found: 404,
  unknown_agent: 404,
  not_found: 404,
  illegal_transition: 409,
  stale_snapshot: 409,
  snapshot_corrupt: 409,
  uncertain_effect: 409,
  halted: 409,
  budget_exceeded: 409,
  already_decided: 409,
  no_pending_approval: 409,
  approval_pending: 409,
  version_mismatch: 409,
  fork_inherits_effects: 409,
  lease_lost: 409,
  payload_too_large: 413,
  store_error: 503,
  store_too_new: 503,
  store_corrupt: 500,
  store_limit: 507,
  wait_timeout: 504,
  // This server lacks an optional package the request needs (a model provider, the MCP SDK).
  missing_dependency: 501,
};

export function httpStatusOf(code: string): ContentfulStatusCode {
  return statusByCode[code as ErrorCode] ?? 500;
}

export function errorBody(code: string, message: string, details?: Record<string, unknown>): ErrorBody {
  return { error: details ? { code, message, details: JSON.parse(JSON.stringify(details)) } : { code, message } };
}

export function errorResponse(c: Context, error: unknown): Response {
  if (TetherError.isInstance(error)) {
    return c.json(errorBody(error.code, error.message, error.details), httpStatusOf(error.code));
  }
  const message = error instanceof Error ? error.message : String(error);
  return c.json(errorBody("internal_error", `the server failed: ${message}`), 500);
}

export class UnauthorizedError extends TetherError<"unauthorized"> {
  constructor(message: string) {
    super("unauthorized", message);
    this.name = "UnauthorizedError";
  }
}

export class ForbiddenError extends TetherError<"forbidden"> {
  constructor(message: string) {
    super("forbidden", message);
    this.name = "ForbiddenError";
  }
}

export class PayloadTooLargeError extends TetherError<"payload_too_large"> {
  constructor(maxBytes: number) {
    super("payload_too_large", `the request body is larger than ${maxBytes} bytes`, { maxBytes });
    this.name = "PayloadTooLargeError";
  }
}

export class RouteNotFoundError extends TetherError<"not_found"> {
  constructor(method: string, path: string) {
    super("not_found", `no route ${method} ${path}; see docs/http-api.md`, { method, path });
    this.name = "RouteNotFoundError";
  }
}
