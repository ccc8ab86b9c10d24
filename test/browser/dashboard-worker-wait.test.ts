import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { buildDashboard, launchChromium, openDashboard, runBrowserSuites, until } from "./browser-harness.js";

/**
 * A run no worker has claimed, in a real browser: the server executes nothing, so a started run
 * stays queued; after a few seconds the run page and the runs list say it waits for a worker, and
 * once a worker starts the notice goes away.
 */

let dir: string;
let store: SqliteStore;
let control: Runtime;
let worker: Runtime | undefined;
let server: RunningServer;
let browser: Browser;
let client: TetherClient;

describe.skipIf(!runBrowserSuites)("dashboard: waiting for a worker (browser)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-dashboard-worker-wait-"));
    await buildDashboard(join(dir, "dashboard"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    control = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
    server = await startServer({ runtime: control, port: 0, dashboardDir: join(dir, "dashboard"), heartbeatMs: 1000, auth: { mode: "open" } });
    client = new TetherClient({ baseUrl: server.url });
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await worker?.close();
    await control?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("shows 'Waiting for a worker' on the run page and in the list, and drops it once a worker claims the run", async () => {
    const run = await client.start("writer", "nobody runs me yet", { budgets: { maxSteps: 2 } });
    const opened = await openDashboard(browser, server.url, "admin");
    const { page } = opened;
    await expect.poll(() => page.locator(`tr.run-row[data-run-id="${run.id}"] [data-testid=worker-wait]`).count(), { timeout: 15_000 }).toBe(1);
    await page.goto(`${server.url}/runs/${run.id}`);
    const panel = page.locator("[data-testid=worker-wait-panel]");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(1);
    expect(await panel.innerText()).toMatch(/Waiting for a worker for [\d.]+ s: it is queued, but no worker has claimed it/);

    worker = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, workerPollMs: 50 });
    worker.startWorker();
    await until("a worker to claim the run", async () => (await client.get(run.id)).status !== "queued");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(0);
    await opened.close();
  }, 90_000);
});
