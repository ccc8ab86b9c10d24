import { getRequestListener } from "@hono/node-server";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { TetherError } from "../engine/errors.js";
import type { Runtime } from "../engine/runtime.js";
import { createApp } from "./app.js";
import type { AuthOptions } from "./auth.js";
import { defaultDashboardDir } from "./dashboard-static.js";
import { errorBody } from "./http-errors.js";
import { loopbackHosts, securityHeaders } from "./request-guard.js";
import { requestTargetProblem } from "./request-target.js";
import { packageVersion } from "./package-info.js";

export interface ServerOptions {
  runtime: Runtime;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /**
   * Default: bearer tokens from the store, and the server refuses to start while none exists
   * (`auth_not_configured`). `{ mode: "open" }` serves without tokens, on a loopback host only.
   */
  auth?: AuthOptions;
  /** Names the server is reached by besides the address it is bound to (its public host), as `host[:port]`. */
  allowedHosts?: readonly string[];
  version?: string;
  /** Default: this package's `dist/dashboard`, when built. */
  dashboardDir?: string;
  heartbeatMs?: number;
  /** Where the runtime's agents came from, for the error a start of an unknown agent gets. */
  agentSource?: string;
}

export interface RunningServer {
  url: string;
  host: string;
  port: number;
  close(): Promise<void>;
}

export class InsecureBindError extends TetherError<"auth_not_configured"> {
  constructor(host: string) {
    super(
      "auth_not_configured",
      `refusing to listen on ${host} with no API token: anyone who can reach it could control your runs. Create one with \`tether token create --role admin --name <you>\`, or bind to 127.0.0.1`,
      { host },
    );
    this.name = "InsecureBindError";
  }
}

export class AuthNotConfiguredError extends TetherError<"auth_not_configured"> {
  constructor() {
    super(
      "auth_not_configured",
      "refusing to serve with no API token: create one with `tether token create --role admin --name <you>`, or pass --open to serve without tokens on this machine's loopback address",
    );
    this.name = "AuthNotConfiguredError";
  }
}

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(?:\.\d{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/** A thin Node shell around `createApp`; it refuses to serve an open API beyond loopback. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopbackHost(host);
  const auth: AuthOptions = options.auth ?? { mode: "tokens" };
  if (auth.mode !== "tokens" && !loopback) throw new InsecureBindError(host);
  if (auth.mode === "tokens") {
    const active = (await options.runtime.store.listTokens()).filter((t) => t.revokedAt === null);
    if (active.length === 0) throw loopback ? new AuthNotConfiguredError() : new InsecureBindError(host);
  }
  // The Host header must name this server; it is known once the port is.
  const allowedHosts: string[] = [];
  const app = createApp({
    runtime: options.runtime,
    auth,
    version: options.version ?? packageVersion(),
    dashboardDir: options.dashboardDir ?? defaultDashboardDir(),
    heartbeatMs: options.heartbeatMs,
    agentSource: options.agentSource,
    allowedHosts: isWildcard(host) && !options.allowedHosts?.length ? undefined : allowedHosts,
  });
  const listener = getRequestListener(app.fetch, { hostname: host, errorHandler: (error) => jsonAnswer(400, "invalid_input", `the request could not be read: ${error instanceof Error ? error.message : String(error)}`) });
  const server = createServer((req, res) => {
    const problem = requestTargetProblem(req.url ?? "/");
    if (problem) return void writeJson(res, 400, problem.code, problem.message);
    void listener(req, res);
  });
  // Requests Node's parser refuses (a raw NUL, a malformed header) still get the JSON error shape.
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    const body = JSON.stringify(errorBody("invalid_input", `the request is not valid HTTP (${error.code ?? error.message})`));
    socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-content-type-options: nosniff\r\nconnection: close\r\n\r\n${body}`);
  });
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.off("listening", onListening);
      const hint = error.code === "EADDRINUSE" ? ` (port ${options.port ?? 4317} is in use: pass --port <n>, or --port 0 for any free port)` : "";
      reject(new TetherError("invalid_input", `cannot listen on ${host}:${options.port ?? 4317}: ${error.message}${hint}`, undefined, { cause: error }));
    };
    const onListening = () => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen(options.port ?? 4317, host);
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  allowedHosts.push(`${urlHost}:${address.port}`, ...(options.allowedHosts ?? []));
  if (loopback) allowedHosts.push(...loopbackHosts(address.port));
  if (address.port === 80) allowedHosts.push(urlHost, ...(loopback ? ["localhost", "127.0.0.1", "[::1]"] : []));
  return {
    url: `http://${urlHost}:${address.port}`,
    host,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Event streams never end on their own.
        server.closeAllConnections();
      }),
  };
}

function jsonAnswer(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify(errorBody(code, message)), { status, headers: { "content-type": "application/json", ...securityHeaders } });
}

function writeJson(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { "content-type": "application/json", ...securityHeaders });
  res.end(JSON.stringify(errorBody(code, message)));
}
