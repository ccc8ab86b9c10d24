import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureAgents } from "../server/fixture-agents.js";
import { type DashboardServer, openDashboard, runBrowserSuites, startDashboardServer, until } from "./browser-harness.js";

/**
 * The runs page's "Waiting for someone" filter in a real browser: the runs that wait for a
 * person (a tripped budget, an uncertain effect), oldest wait first, with why and for how
 * long; a run a person paused is not among them, and a run that is resumed leaves the list.
 * The server runs in this process; workers are separate runtimes on the same store.
 */

let f: DashboardServer;
/** A worker: another runtime on the store, as another process would be. */
const worker = () => f.worker({ agents: fixtureAgents({ slowMs: 3000, tokensPerSecond: 200, rounds: 40 }), leaseMs: 600, workerPollMs: 50 });

describe.skipIf(!runBrowserSuites)("dashboard: runs waiting for someone (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-waiting", { agents: fixtureAgents(), worker: false });
  }, 90_000);

  afterAll(() => f?.close());

  it("lists them oldest wait first with the reason and for how long; a resumed run leaves the list", async () => {
    const first = worker();
    // Oldest: a run that tripped its step budget.
    const budget = await f.client.start("writer", "write until the budget ends", { budgets: { maxSteps: 2 } });
    await f.waitForStatus(budget.id, ["paused"]);
    // Then a run whose worker went away in the middle of a tool that may or may not have happened.
    const uncertain = await f.client.start("slow", "look it up");
    await until("slow_lookup to be in flight", async () => (await f.client.journalAll(uncertain.id)).some((e) => e.type === "call.started" && e.data.name === "slow_lookup"));
    await first.close();
    worker();
    expect((await f.waitForStatus(uncertain.id, ["paused"])).statusReason).toBe("uncertain_effect");
    // Paused by a person, and running: neither waits for a person.
    const byHand = await f.client.start("writer", "write slowly");
    await f.waitForStatus(byHand.id, ["running"]);
    await f.client.pause(byHand.id, { reason: "lunch" });
    await f.waitForStatus(byHand.id, ["paused"]);
    const running = await f.client.start("writer", "keep writing");
    await f.waitForStatus(running.id, ["running"]);

    const opened = await openDashboard(f.browser, f.server.url, "admin");
    const { page } = opened;
    const chip = page.locator("[data-filter=waiting]");
    await expect.poll(() => chip.innerText()).toMatch(/Waiting for someone\s*2/);
    await chip.click();
    expect(page.url()).toContain("?status=waiting");
    const rows = page.locator("tr.run-row");
    await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run-id"))), { timeout: 10_000 }).toEqual([budget.id, uncertain.id]);
    const reasons = page.locator("[data-testid=wait-reason]");
    expect(await reasons.evaluateAll((cells) => cells.map((td) => [td.getAttribute("data-reason"), td.textContent, td.getAttribute("title")]))).toEqual([
      ["budget_steps", "Step budget", "budget_steps: 2 of 2 steps"],
      ["uncertain_effect", "Uncertain effect", "uncertain_effect"],
    ]);
    // For how long: a duration once the wait's start is read from the journal.
    await expect.poll(() => page.locator("[data-testid=wait-since]").allInnerTexts(), { timeout: 10_000 }).toEqual([expect.stringMatching(/^\d/), expect.stringMatching(/^\d/)]);

    // Raised and resumed, the budget run no longer waits: it leaves the list without a reload.
    await f.client.resume(budget.id, { budgets: { maxSteps: 200 } });
    await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run-id"))), { timeout: 10_000 }).toEqual([uncertain.id]);
    await expect.poll(() => chip.innerText()).toMatch(/Waiting for someone\s*1/);

    for (const id of [budget.id, uncertain.id, byHand.id, running.id]) await f.client.cancel(id).catch(() => undefined);
    await opened.close();
  }, 90_000);
});
