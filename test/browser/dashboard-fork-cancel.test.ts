import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Ledger } from "../../src/testing/index.js";
import { forkyAgent } from "../server/fixture-agents.js";
import { type DashboardServer, openDashboard, runBrowserSuites, startDashboardServer } from "./browser-harness.js";

/**
 * The cancel dialog of a run whose effects a live fork inherited: it names the fork and the
 * effects, waits for a choice (keep them, or undo them anyway), and the report shows what was kept.
 */

let f: DashboardServer;
const ledger = new Ledger();

describe.skipIf(!runBrowserSuites)("dashboard: cancelling a run a live fork inherited effects from (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-fork-cancel", { agents: [forkyAgent(ledger)], workerPollMs: 50 });
    f.runtime.startWorker();
  }, 90_000);

  afterAll(() => f?.close());

  it("names the fork and the effects it inherited, waits for a choice; keep undoes only the rest and the report lists the kept ones", async () => {
    const source = await f.client.start("forky", null);
    await f.waitForStatus(source.id, ["paused"]);
    const fork = await f.client.fork(source.id, { fromStep: 2 });
    await f.waitForStatus(fork.id, ["paused"]);

    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${source.id}`, "admin");
    const { page } = opened;
    await page.click("[data-testid=cancel]");
    const dialog = page.locator("[data-testid=cancel-dialog]");
    const inherited = dialog.locator("[data-testid=inherited-effects]");
    await expect.poll(() => inherited.count(), { timeout: 10_000 }).toBe(1);
    const forkRow = await inherited.locator("[data-testid=inheriting-fork]").innerText();
    expect(forkRow).toContain(fork.id);
    expect(forkRow).toContain("forked from step 2");
    expect(forkRow).toContain("work #2");
    expect(forkRow).toContain("work #1");
    // Nothing is chosen for the person: the cancel waits for the choice.
    expect(await dialog.locator("[data-testid=confirm-cancel]").isDisabled()).toBe(true);

    await dialog.locator("label:has([data-testid=inherited-keep])").click();
    expect(await dialog.locator("[data-testid=compensation][data-state=kept]").count()).toBe(2);
    const confirm = dialog.locator("[data-testid=confirm-cancel]");
    expect(await confirm.isDisabled()).toBe(false);
    expect(await confirm.innerText()).toBe("Cancel and undo 1");
    await confirm.click();

    await expect.poll(() => dialog.locator("[data-testid=cancel-done]").count(), { timeout: 30_000 }).toBe(1);
    expect(await dialog.locator("[data-testid=cancel-done]").innerText()).toContain("except 2 kept for the forks");
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["c"]);
    const cancelled = await f.client.get(source.id);
    expect(cancelled.report?.kept?.map((k) => [k.callSeq, k.forks])).toEqual([
      [2, [fork.id]],
      [1, [fork.id]],
    ]);
    const journal = await f.client.journalAll(source.id);
    expect(journal.find((e) => e.type === "control" && e.data.command === "cancel")?.data).toMatchObject({ inherited: "keep", actor: "anonymous" });

    await page.keyboard.press("Escape");
    await expect.poll(() => page.locator("[data-testid=report-kept]").innerText(), { timeout: 10_000 }).toContain(`inherited by ${fork.id}`);
    expect((await f.client.get(fork.id)).status).toBe("paused");
    await opened.close();
  }, 90_000);
});
