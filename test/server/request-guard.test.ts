import { mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { createApiToken } from "../../src/server/tokens.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "./fixture-agents.js";

/**
 * The attacks a web page can mount on a server on the developer's machine, over real HTTP
 * (node's http client, which, unlike a browser, lets the test set Host), each refused, and none
 * changing anything: the server's runs are listed before and after.
 */

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = httpRequest({ host: target.hostname, port: target.port, path: target.pathname + target.search, method: options.method ?? "GET", headers: options.headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

describe("a server on loopback, against cross-site pages and DNS rebinding", () => {
  let dir: string;
  let store: SqliteStore;
  let runtime: Runtime;
  let open: RunningServer;
  let token: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-guard-"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
    token = (await createApiToken(store, { name: "ada", role: "admin" })).token;
    // The most exposed configuration: open mode (no token needed) on loopback.
    open = await startServer({ runtime, host: "127.0.0.1", port: 0, auth: { mode: "open" } });
  });

  afterAll(async () => {
    await open.close();
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = JSON.stringify({ agent: "writer", input: "x" });

  it("refuses a text/plain POST from another origin (a simple request, sent without a preflight): 403 origin_refused, no run", async () => {
    const answer = await send(`${open.url}/api/v1/runs`, { method: "POST", headers: { origin: "http://evil.example", "content-type": "text/plain" }, body: start });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).error).toMatchObject({ code: "origin_refused", message: expect.stringContaining('"http://evil.example"') });
    expect(await runtime.list()).toEqual([]);
  });

  it("refuses a JSON POST from another loopback origin too, and an opaque (null) origin", async () => {
    for (const origin of ["http://127.0.0.1:1", "http://localhost:5173", "null"]) {
      const answer = await send(`${open.url}/api/v1/runs`, { method: "POST", headers: { origin, "content-type": "application/json" }, body: start });
      expect(answer.status, origin).toBe(403);
      expect(JSON.parse(answer.body).error.code).toBe("origin_refused");
    }
    const crossSite = await send(`${open.url}/api/v1/halt`, { method: "POST", headers: { "sec-fetch-site": "cross-site", "content-type": "application/json" }, body: "{}" });
    expect(crossSite.status).toBe(403);
    expect(await runtime.list()).toEqual([]);
    expect(await runtime.halts()).toEqual([]);
  });

  it("refuses a body that is not JSON even without an Origin: 415 unsupported_media_type", async () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const answer = await send(`${open.url}/api/v1/runs`, { method: "POST", headers: { "content-type": type }, body: start });
      expect(answer.status, type).toBe(415);
      expect(JSON.parse(answer.body).error).toMatchObject({ code: "unsupported_media_type" });
    }
    const none = await send(`${open.url}/api/v1/runs`, { method: "POST", headers: {}, body: start });
    expect(none.status).toBe(415);
    expect(await runtime.list()).toEqual([]);
  });

  it("refuses a Host that is not its own (DNS rebinding): 403 host_refused, for reads and the dashboard too", async () => {
    const port = new URL(open.url).port;
    for (const path of ["/api/v1/runs", "/api/v1/health", "/"]) {
      const answer = await send(`${open.url}${path}`, { headers: { host: `attacker.example:${port}` } });
      expect(answer.status, path).toBe(403);
      expect(JSON.parse(answer.body).error.code).toBe("host_refused");
    }
    // Its own names are fine.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) expect((await send(`${open.url}/api/v1/runs`, { headers: { host } })).status, host).toBe(200);
  });

  it("accepts its own dashboard's requests: same origin, JSON", async () => {
    const answer = await send(`${open.url}/api/v1/runs`, { method: "POST", headers: { origin: open.url, "content-type": "application/json" }, body: start });
    expect(answer.status).toBe(201);
    await runtime.cancel(JSON.parse(answer.body).run.id);
  });

  it("sends nosniff, no referrer and no framing with every answer, and a Content-Security-Policy with the dashboard", async () => {
    const page = await send(`${open.url}/`, {});
    expect(page.headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(page.headers["content-security-policy"]).toContain("default-src 'self'");
    for (const answer of [page, await send(`${open.url}/api/v1/runs`, {}), await send(`${open.url}/api/v1/nope`, {})]) {
      expect(answer.headers["x-content-type-options"]).toBe("nosniff");
      expect(answer.headers["referrer-policy"]).toBe("no-referrer");
      expect(answer.headers["x-frame-options"]).toBe("DENY");
    }
  });

  it("a token server with a public name answers to it, and to nothing else", async () => {
    const named = await startServer({ runtime, host: "127.0.0.1", port: 0, allowedHosts: ["tether.example.com"] });
    try {
      const auth = { authorization: `Bearer ${token}` };
      expect((await send(`${named.url}/api/v1/runs`, { headers: { ...auth, host: "tether.example.com" } })).status).toBe(200);
      expect((await send(`${named.url}/api/v1/runs`, { headers: { ...auth, host: "other.example.com" } })).status).toBe(403);
    } finally {
      await named.close();
    }
  });
});
