import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DamagedRun } from "../../src/engine/store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { openDashboard, runBrowserSuites, startDashboardServer, type DashboardServer } from "./browser-harness.js";

/**
 * A run whose row was changed behind Tether's back (its checksum fails): the runs page still
 * lists every other run, and a banner names the damaged one instead of the page failing to load.
 */

let f: DashboardServer;

describe.skipIf(!runBrowserSuites)("dashboard: a damaged run row (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-damaged", { agents: fixtureAgents({ tokensPerSecond: 400 }) });
    f.runtime.startWorker();
  }, 90_000);

  afterAll(() => f?.close());

  it("lists the other runs and names the damaged one in a banner; the API and client name it in damaged", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await f.client.start("writer", `topic ${i}`)).id);
    for (const id of ids) await f.waitForStatus(id, ["completed"]);
    const [damagedId, ...others] = ids;
    f.store.database.prepare("UPDATE runs SET created_at = created_at + 1 WHERE id = ?").run(damagedId);

    const damaged: DamagedRun[] = [];
    expect((await f.client.list({}, damaged)).map((run) => run.id).sort()).toEqual(others.slice().sort());
    expect(damaged).toEqual([{ id: damagedId, agent: "writer", status: "completed", code: "store_corrupt", message: expect.stringContaining(`run ${damagedId}: its run row fails its checksum`) }]);

    const { page, close } = await openDashboard(f.browser, f.server.url, "admin");
    try {
      const banner = page.locator("[data-testid=damaged-banner]");
      await expect.poll(() => banner.count(), { timeout: 10_000 }).toBe(1);
      const text = await banner.innerText();
      expect(text).toContain("1 run could not be read");
      expect(text).toContain(`${damagedId} (writer, completed)`);
      expect(text).toContain("tether verify");
      await expect.poll(() => page.locator("[data-testid=runs-table] .run-row").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-run-id")).sort())).toEqual(others.slice().sort());
      await page.screenshot({ path: join(f.dir, "damaged.png") });
    } finally {
      await close();
    }
  });
});
