import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { buildDashboard, runBrowserSuites, launchChromium, until } from "./browser-harness.js";

/**
 * A page the developer visits, served from another loopback origin, attacks the local Tether
 * (in open mode, the most exposed setting) in a real Chromium: a simple text/plain POST, a
 * no-cors JSON POST, an auto-submitted form, a cross-origin read, and framing the dashboard.
 * Every one is refused, and nothing changes on the server.
 */

let dir: string;
let store: SqliteStore;
let runtime: Runtime;
let tether: RunningServer;
let evil: Server;
let evilUrl: string;
let browser: Browser;

function evilPage(target: string): string {
  const start = JSON.stringify(JSON.stringify({ agent: "writer", input: "pwned" }));
  return `<!doctype html><title>cat pictures</title>
<form id="form" method="post" enctype="text/plain" action="${target}/api/v1/halt" target="sink"><input name='{"reason":"x","pad":"' value='"}'></form>
<iframe name="sink"></iframe>
<iframe id="framed" src="${target}/"></iframe>
<script>
window.results = {};
(async () => {
  try { await fetch("${target}/api/v1/runs", { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: ${start} }); window.results.simplePost = "sent"; } catch (e) { window.results.simplePost = "blocked: " + e.message; }
  try { await fetch("${target}/api/v1/runs", { method: "POST", headers: { "content-type": "application/json" }, body: ${start} }); window.results.jsonPost = "sent"; } catch (e) { window.results.jsonPost = "blocked: " + e.message; }
  try { const r = await fetch("${target}/api/v1/runs"); window.results.read = await r.text(); } catch (e) { window.results.read = "blocked: " + e.message; }
  document.getElementById("form").submit();
  window.results.done = true;
})();
</script>`;
}

describe.skipIf(!runBrowserSuites)("a web page on another origin against a local Tether (browser)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-cross-origin-"));
    await buildDashboard(join(dir, "dashboard"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
    tether = await startServer({ runtime, port: 0, dashboardDir: join(dir, "dashboard"), auth: { mode: "open" } });
    evil = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(evilPage(tether.url)));
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
    evilUrl = `http://localhost:${(evil.address() as { port: number }).port}/`;
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => evil?.close(resolve));
    await tether?.close();
    await runtime?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("starts nothing, halts nothing, reads nothing, and cannot frame the dashboard", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const posted: string[] = [];
    const refusals: number[] = [];
    page.on("request", (request) => {
      if (request.url().startsWith(tether.url) && request.method() === "POST") posted.push(request.url());
    });
    page.on("response", (response) => {
      if (response.url().startsWith(tether.url) && response.request().method() === "POST") refusals.push(response.status());
    });
    await page.goto(evilUrl);
    const results = await until("the page's attacks to finish", async () => {
      const r = (await page.evaluate("window.results")) as Record<string, unknown> | undefined;
      return r?.done ? r : undefined;
    });
    // The reads never reach the page: no CORS header, so the browser withholds the answer.
    expect(String(results.read)).toMatch(/^blocked/);
    // The simple POST (no preflight) and the form went out; the JSON POST needs a preflight the
    // server never grants. The form's answer is visible to the browser: refused.
    await until("the form's answer", async () => refusals.length >= 1 || undefined);
    expect(posted.filter((url) => url.endsWith("/api/v1/runs")).length).toBeGreaterThanOrEqual(1);
    expect(posted.filter((url) => url.endsWith("/api/v1/halt"))).toHaveLength(1);
    expect(refusals).toEqual([403]);
    // The dashboard did not load inside the page's frame (frame-ancestors 'none').
    const framed = page.frames().find((f) => f.name() === "" && f !== page.mainFrame() && f.url() !== "about:blank");
    expect(framed ? await framed.locator("[data-testid=role]").count() : 0).toBe(0);
    // And nothing changed.
    expect(await runtime.list()).toEqual([]);
    expect(await runtime.halts()).toEqual([]);
    await context.close();
  }, 60_000);
});
