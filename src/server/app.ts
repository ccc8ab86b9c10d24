import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Runtime } from "../engine/runtime.js";
import type { Role } from "./api-types.js";
import { authenticate, requireRole, type AuthOptions, type TokenSource } from "./auth.js";
import { dashboardHandler } from "./dashboard-static.js";
import { TetherError, UnknownAgentError } from "../engine/errors.js";
import { errorBody, errorResponse, ForbiddenError, PayloadTooLargeError, RouteNotFoundError, UnauthorizedError } from "./http-errors.js";
import { dashboardCsp, requestGuard, securityHeaders } from "./request-guard.js";
import { agentRoutes } from "./routes/agent-routes.js";
import { controlRoutes } from "./routes/control-routes.js";
import { eventRoutes } from "./routes/event-routes.js";
import { haltRoutes } from "./routes/halt-routes.js";
import { retentionRoutes } from "./routes/retention-routes.js";
import { healthRoutes, whoamiRoutes } from "./routes/health-routes.js";
import { openApiRoutes } from "./routes/openapi-routes.js";
import { runRoutes } from "./routes/run-routes.js";
import type { AppEnv, ServerContext } from "./server-context.js";

export const maxBodyBytes = 1024 * 1024;

export interface AppOptions {
  runtime: Runtime;
  auth: AuthOptions;
  version: string;
  /** Where tokens are looked up; default the runtime's store. */
  tokens?: TokenSource;
  /** The built dashboard served at `/`; without it `/` says the dashboard is not built. */
  dashboardDir?: string;
  /** Comment lines on idle event streams, so proxies keep them open. Default 15 s. */
  heartbeatMs?: number;
  /**
   * `host[:port]` values the `Host` header may carry (see request-guard.ts); `startServer` sets the
   * addresses it is bound to. Undefined accepts any host (a test calling `app.fetch`).
   */
  allowedHosts?: readonly string[];
  /**
   * Where the runtime's agents came from (`tether.config.ts`, an `--agents` module, the bundled
   * examples): a start that names an unknown agent says so, and how to register one.
   */
  agentSource?: string;
}

/** The HTTP API (docs/http-api.md) at `/api/v1`, and the dashboard at `/`. `app.fetch` is the handler. */
export function createApp(options: AppOptions): Hono<AppEnv> {
  const tokens = options.tokens ?? options.runtime.store;
  const ctx: ServerContext = {
    runtime: options.runtime,
    version: options.version,
    heartbeatMs: options.heartbeatMs ?? 15_000,
    guard(role: Role | "none") {
      return async (c, next) => {
        if (role !== "none") {
          const identity = await authenticate(c, options.auth, tokens);
          requireRole(identity, role);
          c.set("identity", identity);
        }
        await next();
      };
    },
    async stillAllowed(c, role) {
      try {
        requireRole(await authenticate(c, options.auth, tokens), role);
        return true;
      } catch (error) {
        return !(error instanceof UnauthorizedError || error instanceof ForbiddenError);
      }
    },
  };

  const api = new Hono<AppEnv>();
  api.use("*", bodyLimit({ maxSize: maxBodyBytes, onError: (c) => errorResponse(c, new PayloadTooLargeError(maxBodyBytes)) }));
  healthRoutes(api, ctx);
  whoamiRoutes(api, ctx);
  agentRoutes(api, ctx);
  runRoutes(api, ctx);
  controlRoutes(api, ctx);
  haltRoutes(api, ctx);
  retentionRoutes(api, ctx);
  eventRoutes(api, ctx);
  openApiRoutes(api, ctx);
  api.notFound((c) => c.json(errorBody("not_found", new RouteNotFoundError(c.req.method, c.req.path).message), 404));
  api.onError((error, c) => errorResponse(c, withAgentSource(error, options.agentSource)));

  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    await next();
    for (const [name, value] of Object.entries(securityHeaders)) c.res.headers.set(name, value);
    if (!c.req.path.startsWith("/api/")) c.res.headers.set("content-security-policy", dashboardCsp);
  });
  app.use("*", requestGuard({ allowedHosts: options.allowedHosts }));
  app.route("/api/v1", api);
  app.all("/api/*", (c) => errorResponse(c, new RouteNotFoundError(c.req.method, c.req.path)));
  app.get("*", dashboardHandler(options.dashboardDir));
  app.onError((error, c) => errorResponse(c, error));
  return app;
}

/** An unknown agent, told where this server's agents come from and where to add one. */
function withAgentSource(error: unknown, source: string | undefined): unknown {
  if (source === undefined || !TetherError.isInstance(error) || error.code !== "unknown_agent") return error;
  const details = error.details as { name?: unknown; known?: unknown } | undefined;
  if (typeof details?.name !== "string" || !Array.isArray(details.known)) return error;
  return new UnknownAgentError(details.name, details.known as string[], source);
}
