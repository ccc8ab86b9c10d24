import fc from "fast-check";
import { request as httpRequest } from "node:http";
import type { Hono } from "hono";

/**
 * A property-based fuzz of every route of the HTTP API (fast-check): hostile paths, ids,
 * headers, tokens, cursors and bodies, sent over real HTTP as raw bytes. The property: never a
 * 5xx, never a dropped connection, every error in the JSON shape `{ error: { code, message } }`,
 * and a refused request changes nothing (`snapshot()` is equal before and after).
 */

export interface FuzzTarget {
  url: string;
  tokens: { admin: string; operator: string; viewer: string };
  /** Ids of runs that exist, so some requests reach real runs. */
  runIds: string[];
  /** Everything a request could change, serialised. */
  snapshot(): Promise<string>;
}

export interface FuzzReport {
  requests: number;
  violations: string[];
}

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

export function routesOf(app: Hono): { method: string; path: string }[] {
  const seen = new Set<string>();
  return app.routes
    .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/"))
    .filter((r) => !seen.has(`${r.method} ${r.path}`) && seen.add(`${r.method} ${r.path}`))
    .map((r) => ({ method: r.method, path: r.path }));
}

const hostileStrings = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom("..", "%2e%2e", "..%2f..%2fetc%2fpasswd", "a\\b", "%00", "a%00b", "%ZZ", "%", "run_", "run_00000000", "\u202e", "😀", " ", "%20", "null", "-1", "1e309", "__proto__", "constructor"),
  fc.string({ minLength: 1000, maxLength: 5000 }).map((s) => s.replace(/[^a-z]/g, "x")),
);

function deepJson(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

const hostileBodies = fc.oneof(
  fc.constant(undefined),
  fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v))),
  fc.record({ agent: hostileStrings, input: fc.jsonValue({ maxDepth: 3 }) }).map((v) => Buffer.from(JSON.stringify(v))),
  fc.record({ reason: hostileStrings, mode: hostileStrings, message: hostileStrings, patch: fc.jsonValue({ maxDepth: 3 }), fromStep: fc.oneof(fc.integer(), fc.double()) }, { requiredKeys: [] }).map((v) => Buffer.from(JSON.stringify(v))),
  fc.constantFrom(deepJson(10_000), `{"agent":"writer","input":${deepJson(10_000)}}`, `{"patch":${"{\"a\":".repeat(5000)}1${"}".repeat(5000)}}`).map((s) => Buffer.from(s)),
  fc.constant(Buffer.from("x".repeat(2 * 1024 * 1024))),
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
  fc.constant(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
  fc.constantFrom("{", "}", "[", "\"", "{\"agent\":", "nul").map((s) => Buffer.from(s)),
);

function requestArb(target: FuzzTarget, routes: { method: string; path: string }[]): fc.Arbitrary<FuzzRequest> {
  const id = fc.oneof(fc.constantFrom(...(target.runIds.length ? target.runIds : ["run_missing"])), hostileStrings);
  const token = fc.oneof(
    fc.constantFrom(target.tokens.admin, target.tokens.operator, target.tokens.viewer),
    fc.constantFrom("", "Bearer", "tether_", "Bearer tether_nope", "Basic YWRtaW46YWRtaW4=", `Bearer ${target.tokens.admin}x`, `Bearer  ${target.tokens.admin} extra`),
    hostileStrings,
  );
  return fc
    .record({
      route: fc.constantFrom(...routes),
      method: fc.oneof({ weight: 8, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS") }),
      id,
      rawId: fc.boolean(),
      suffix: fc.oneof({ weight: 5, arbitrary: fc.constant("") }, { weight: 1, arbitrary: fc.constantFrom("/", "//", "/..", "?x=%ZZ", "?limit=-1", "?limit=99999999999", "?after=zz", "?status=nope", "?agent=" + "a".repeat(3000), "#frag") }),
      token,
      contentType: fc.constantFrom("application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", "", "application/json; charset=latin1"),
      lastEventId: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom("", " ", "?", "abc", "-1", "1.2.3", "99999999999999999999", "3", "3.1", "\u00ff") }),
      body: hostileBodies,
    })
    .map(({ route, method, id: rawValue, rawId, suffix, token: tok, contentType, lastEventId, body }) => {
      // Half the time the id goes into the path as it is (raw backslashes, dots, percent signs).
      const idInPath = rawId ? rawValue : encodeURIComponent(rawValue);
      const path = route.path.replace(":id", idInPath) + suffix;
      const headers: Record<string, string> = {};
      if (tok) headers.authorization = tok.startsWith("Bearer") || tok.startsWith("Basic") || tok === "" ? tok : `Bearer ${tok}`;
      if (contentType && body) headers["content-type"] = contentType;
      if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
      return { method: method ?? route.method, path, headers, body };
    });
}

export interface Answer {
  status: number;
  contentType: string;
  body: string;
  streaming: boolean;
}

export function send(url: string, req: FuzzRequest): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const headers: Record<string, string> = {};
    // Header values must be latin-1 for Node; anything else would never leave a real client either.
    for (const [k, v] of Object.entries(req.headers)) if (/^[\x20-\x7e]*$/.test(v)) headers[k] = v;
    let outgoing;
    try {
      outgoing = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.path.startsWith("/") ? req.path : `/${req.path}`, headers, agent: false, insecureHTTPParser: true }, (res) => {
        const contentType = String(res.headers["content-type"] ?? "");
        if (contentType.includes("text/event-stream")) {
          res.destroy();
          return resolve({ status: res.statusCode ?? 0, contentType, body: "", streaming: true });
        }
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, contentType, body, streaming: false }));
        res.on("error", reject);
      });
    } catch (error) {
      // Node refuses to send this path (an unescaped character): no request, nothing to check.
      return resolve({ status: -1, contentType: "", body: String(error), streaming: false });
    }
    outgoing.on("error", reject);
    if (req.body) outgoing.write(req.body);
    outgoing.end();
  });
}

function shapeProblem(answer: Answer): string | undefined {
  if (answer.status >= 500) return `a ${answer.status}`;
  if (answer.status < 400 || answer.status === -1) return undefined;
  if (!answer.contentType.includes("application/json")) return `a ${answer.status} with content-type "${answer.contentType}"`;
  try {
    const parsed = JSON.parse(answer.body) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed.error?.code !== "string" || typeof parsed.error.message !== "string" || parsed.error.message.length === 0) return `a ${answer.status} without { error: { code, message } }`;
  } catch {
    return `a ${answer.status} whose body is not JSON`;
  }
  return undefined;
}

/** Runs `runs` fuzzed requests against `target`; deterministic for a seed. */
export async function fuzzApi(target: FuzzTarget, routes: { method: string; path: string }[], options: { runs: number; seed: number }): Promise<FuzzReport> {
  const violations: string[] = [];
  let requests = 0;
  await fc.assert(
    fc.asyncProperty(requestArb(target, routes), async (req) => {
      const before = await target.snapshot();
      let answer: Answer;
      try {
        answer = await send(target.url, req);
      } catch (error) {
        violations.push(`${req.method} ${req.path.slice(0, 80)} (${JSON.stringify(req.headers).slice(0, 120)}, body ${req.body?.length ?? "none"} bytes): the connection failed (${String(error)})`);
        return;
      }
      requests++;
      const problem = shapeProblem(answer);
      if (problem) violations.push(`${req.method} ${req.path.slice(0, 80)} → ${problem}: ${answer.body.slice(0, 200)}`);
      if (answer.status >= 400 || answer.status === -1) {
        const after = await target.snapshot();
        if (after !== before) violations.push(`${req.method} ${req.path.slice(0, 80)} was refused (${answer.status}) but changed the server's state`);
      }
    }),
    { numRuns: options.runs, seed: options.seed, endOnFailure: false },
  );
  return { requests, violations };
}
