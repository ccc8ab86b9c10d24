import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime } from "../../src/engine/runtime.js";
import type { DamagedRun } from "../../src/engine/store.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { buildDashboard, launchChromium, openDashboard, runBrowserSuites } from "./browser-harness.js";

/**
 * A run whose row was changed behind Tether's back (its checksum fails): the runs page still
 * lists every other run, and a banner names the damaged one instead of the page failing to load.
 */

let dir: string;
let store: SqliteStore;
let runtime: Runtime;
let server: RunningServer;
let browser: Browser;
let client: TetherClient;

describe.skipIf(!runBrowserSuites)("dashboard: a damaged run row (browser)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-dashboard-damaged-"));
    await buildDashboard(join(dir, "dashboard"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: fixtureAgents({ tokensPerSecond: 400 }), resolveModel: new ModelRegistry().resolver });
    runtime.startWorker();
    server = await startServer({ runtime, port: 0, dashboardDir: join(dir, "dashboard"), heartbeatMs: 1000, auth: { mode: "open" } });
    client = new TetherClient({ baseUrl: server.url });
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await runtime?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("lists the other runs and names the damaged one in a banner; the API and client name it in damaged", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await client.start("writer", `topic ${i}`)).id);
    for (const id of ids) await runtime.waitFor(id, ["completed"], { timeoutMs: 20_000 });
    const [damagedId, ...others] = ids;
    store.database.prepare("UPDATE runs SET created_at = created_at + 1 WHERE id = ?").run(damagedId);

    const damaged: DamagedRun[] = [];
    expect((await client.list({}, damaged)).map((run) => run.id).sort()).toEqual(others.slice().sort());
    expect(damaged).toEqual([{ id: damagedId, agent: "writer", status: "completed", code: "store_corrupt", message: expect.stringContaining(`run ${damagedId}: its run row fails its checksum`) }]);

    const { page, close } = await openDashboard(browser, server.url, "admin");
    try {
      const banner = page.locator("[data-testid=damaged-banner]");
      await expect.poll(() => banner.count(), { timeout: 10_000 }).toBe(1);
      const text = await banner.innerText();
      expect(text).toContain("1 run could not be read");
      expect(text).toContain(`${damagedId} (writer, completed)`);
      expect(text).toContain("tether verify");
      await expect.poll(() => page.locator("[data-testid=runs-table] .run-row").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-run-id")).sort())).toEqual(others.slice().sort());
      await page.screenshot({ path: join(dir, "damaged.png") });
    } finally {
      await close();
    }
  });
});
