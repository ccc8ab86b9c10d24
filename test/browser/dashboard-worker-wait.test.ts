import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureAgents } from "../server/fixture-agents.js";
import { type DashboardServer, openDashboard, runBrowserSuites, startDashboardServer, until } from "./browser-harness.js";

/**
 * A run no worker has claimed, in a real browser: the server executes nothing, so a started run
 * stays queued; after a few seconds the run page and the runs list say it waits for a worker, and
 * once a worker starts the notice goes away.
 */

let f: DashboardServer;

describe.skipIf(!runBrowserSuites)("dashboard: waiting for a worker (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-worker-wait", { agents: fixtureAgents(), worker: false });
  }, 90_000);

  afterAll(() => f?.close());

  it("shows 'Waiting for a worker' on the run page and in the list, and drops it once a worker claims the run", async () => {
    const run = await f.client.start("writer", "nobody runs me yet", { budgets: { maxSteps: 2 } });
    const opened = await openDashboard(f.browser, f.server.url, "admin");
    const { page } = opened;
    await expect.poll(() => page.locator(`tr.run-row[data-run-id="${run.id}"] [data-testid=worker-wait]`).count(), { timeout: 15_000 }).toBe(1);
    await page.goto(`${f.server.url}/runs/${run.id}`);
    const panel = page.locator("[data-testid=worker-wait-panel]");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(1);
    expect(await panel.innerText()).toMatch(/Waiting for a worker for [\d.]+ s: it is queued, but no worker has claimed it/);

    f.worker({ agents: fixtureAgents(), workerPollMs: 50 });
    await until("a worker to claim the run", async () => (await f.client.get(run.id)).status !== "queued");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(0);
    await opened.close();
  }, 90_000);
});
