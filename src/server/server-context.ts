import type { Hono, MiddlewareHandler } from "hono";
import type { Runtime } from "../engine/runtime.js";
import type { Role } from "./api-types.js";
import type { Identity } from "./auth.js";

export type AppEnv = { Variables: { identity: Identity } };

export type Api = Hono<AppEnv>;

/** What every route group gets: the runtime and the role each route needs. */
export interface ServerContext {
  runtime: Runtime;
  version: string;
  heartbeatMs: number;
  /** Middleware: authenticate, then require `role`. SSE routes also accept `?token=`. */
  guard(role: Role | "none", options?: { queryToken?: boolean }): MiddlewareHandler<AppEnv>;
}
