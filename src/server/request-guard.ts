import type { MiddlewareHandler } from "hono";
import { TetherError } from "../engine/errors.js";

/**
 * Who may talk to the server at all, checked before routing and auth: the defence against a web
 * page the developer happens to visit (cross-site requests, DNS rebinding) and against framing.
 *
 * - `Host` must name this server: the address it is bound to (any loopback name, for a loopback
 *   server) or one of `allowedHosts` (its public name). Otherwise 403 `host_refused`: a page that
 *   rebinds its own domain to 127.0.0.1 gets nothing back.
 * - A state-changing request (anything but GET, HEAD, OPTIONS) whose `Origin` is present must come
 *   from this server's own origin, else 403 `origin_refused`; `Sec-Fetch-Site: cross-site` is
 *   refused the same way when a browser sends it without an Origin.
 * - A request body must be JSON (`application/json` or `…+json`), else 415
 *   `unsupported_media_type`: a `text/plain` POST (which a browser sends without a preflight) is
 *   never read as a command.
 */
export interface RequestGuardOptions {
  /** `host[:port]` values accepted in `Host`; undefined accepts any (a server bound to every interface, behind tokens). */
  allowedHosts?: readonly string[];
}

export class HostRefusedError extends TetherError<"host_refused"> {
  constructor(host: string) {
    super("host_refused", `this server does not answer to the host "${host.slice(0, 100)}"; use its own address (or start it with --allowed-host)`, { host: host.slice(0, 100) });
    this.name = "HostRefusedError";
  }
}

export class OriginRefusedError extends TetherError<"origin_refused"> {
  constructor(origin: string) {
    super("origin_refused", `a request from the web origin "${origin.slice(0, 100)}" may not change anything here; only this server's own dashboard may`, { origin: origin.slice(0, 100) });
    this.name = "OriginRefusedError";
  }
}

export class UnsupportedMediaTypeError extends TetherError<"unsupported_media_type"> {
  constructor(type: string | undefined) {
    super("unsupported_media_type", `the request body must be JSON, sent with content-type: application/json${type ? ` (got "${type.slice(0, 60)}")` : " (none was sent)"}`, { contentType: type?.slice(0, 60) ?? null });
    this.name = "UnsupportedMediaTypeError";
  }
}

const safeMethods = new Set(["GET", "HEAD", "OPTIONS"]);

/** The loopback names a browser may use for a server bound to a loopback address on `port`. */
export function loopbackHosts(port: number): string[] {
  return ["127.0.0.1", "localhost", "[::1]"].map((h) => `${h}:${port}`);
}

function normalisedHost(value: string): string {
  return value.trim().toLowerCase().replace(/\.$/, "");
}

export function requestGuard(options: RequestGuardOptions): MiddlewareHandler {
  // Read on each request: a server learns its own port only once it listens.
  const allowed = options.allowedHosts;
  return async (c, next) => {
    const host = c.req.header("host") ?? "";
    if (allowed && !allowed.some((h) => normalisedHost(h) === normalisedHost(host))) throw new HostRefusedError(host);
    if (!safeMethods.has(c.req.method)) {
      const origin = c.req.header("origin");
      // An opaque origin ("null": a sandboxed frame, a file) is never this server's own.
      if (origin !== undefined) {
        if (!sameOrigin(origin, host)) throw new OriginRefusedError(origin);
      } else if (c.req.header("sec-fetch-site") === "cross-site") {
        throw new OriginRefusedError("(cross-site)");
      }
      if (hasBody(c.req.raw.headers)) {
        const type = c.req.header("content-type");
        if (!type || !/^application\/([\w.-]+\+)?json\s*(;|$)/i.test(type.trim())) throw new UnsupportedMediaTypeError(type);
      }
    }
    await next();
  };
}

/** The Origin names the same scheme-less host:port as the request's Host (which the check above vouched for). */
function sameOrigin(origin: string, host: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") && normalisedHost(url.host) === normalisedHost(host);
  } catch {
    return false;
  }
}

function hasBody(headers: Headers): boolean {
  const length = headers.get("content-length");
  if (length !== null) return Number(length) > 0;
  return headers.has("transfer-encoding");
}

/** Headers on every answer; the dashboard's page also gets its Content-Security-Policy. */
export const securityHeaders: Record<string, string> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-resource-policy": "same-origin",
};

export const dashboardCsp = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");
