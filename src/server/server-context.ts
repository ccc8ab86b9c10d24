import type { Context, Hono, MiddlewareHandler } from "hono";
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
  /** Middleware: authenticate (a bearer token in the Authorization header, never in the URL), then require `role`. */
  guard(role: Role | "none"): MiddlewareHandler<AppEnv>;
  /**
   * Whether the request's token still grants `role` (a long-lived event stream asks at each
   * heartbeat): false once it is revoked or lowered; true when the store cannot say just now.
   */
  stillAllowed(c: Context<AppEnv>, role: Role): Promise<boolean>;
}
