import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvalAgent, fixtureAgents, type FixtureLog } from "../server/fixture-agents.js";
import { root } from "./serve-child.js";
import { type DashboardServer, openDashboard, runBrowserSuites, runStatus, startDashboardServer } from "./browser-harness.js";

/**
 * Approvals in a real browser: a run paused before calls that need a person's approval shows
 * each call with its arguments; Approve, Reject (with a note) and Edit decide them, and the run
 * goes on once all are decided. The server runs in this process without a worker; the worker
 * is another runtime on the same store.
 */

let f: DashboardServer;
const log: FixtureLog = { executed: [], compensated: [] };
/** `npm run screenshots` refreshes docs/screenshots; otherwise the picture goes to the test's folder. */
const screenshots = () => (process.env.TETHER_SCREENSHOTS ? resolve(root, process.env.TETHER_SCREENSHOTS) : f.dir);

describe.skipIf(!runBrowserSuites)("dashboard: approvals (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-approval", { agents: [...fixtureAgents(), approvalAgent()], worker: false });
    f.worker({ agents: [...fixtureAgents(), approvalAgent(log)], workerPollMs: 50 });
  }, 90_000);

  afterAll(() => f?.close());

  it("shows each pending call with its arguments; Approve one, Reject the other with a note; the run continues after both", async () => {
    const run = await f.client.start("payer", "pay two suppliers");
    await f.waitForStatus(run.id, ["paused"]);
    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    const panel = page.locator("[data-testid=approval-panel]");
    await expect.poll(() => panel.innerText(), { timeout: 10_000 }).toContain("2 calls wait for your approval");
    const first = page.locator("[data-testid=approval-2]");
    const second = page.locator("[data-testid=approval-3]");
    expect(await first.innerText()).toContain("send_payment");
    expect(await first.innerText()).toContain("acme");
    expect(await second.innerText()).toContain("globex");
    await page.screenshot({ path: join(screenshots(), "approval.png") });
    // Resume would not get past them: the calls are decided below.
    expect(await page.locator("[data-testid=control-bar] [data-testid=resume]").isDisabled()).toBe(true);

    await first.locator("[data-testid=approve]").click();
    await expect.poll(() => first.locator("[data-testid=approval-decision]").innerText(), { timeout: 10_000 }).toContain("approved by");
    // One call still waits: nothing runs.
    expect((await f.client.get(run.id)).status).toBe("paused");
    expect(log.executed).toEqual([]);

    await second.locator("[data-testid=reject]").click();
    await second.locator("[data-testid=reject-note]").fill("globex is not a supplier");
    await second.locator("[data-testid=reject-confirm]").click();
    await expect.poll(() => runStatus(page).innerText(), { timeout: 15_000 }).toMatch(/completed/i);
    expect(log.executed.map((l) => l.split(" ").slice(0, 3).join(" "))).toEqual(["send_payment acme 120"]);
    const decided = (await f.client.journalAll(run.id)).filter((e) => e.type === "approval.decided").map((e) => [e.callSeq, e.data.decision, e.data.note]);
    expect(decided).toEqual([
      [2, "approved", null],
      [3, "rejected", "globex is not a supplier"],
    ]);
    await opened.close();
  }, 90_000);

  it("Edit changes the arguments before approving: the tool sees the edited ones and the journal keeps both", async () => {
    log.executed.length = 0;
    const run = await f.client.start("payer", "pay acme");
    await f.waitForStatus(run.id, ["paused"]);
    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    const call = page.locator("[data-testid=approval-2]");
    await expect.poll(() => call.count(), { timeout: 10_000 }).toBe(1);
    await call.locator("[data-testid=edit]").click();
    await call.locator("[data-testid=edit-input]").fill(JSON.stringify({ to: "acme", amount: 42 }));
    await call.locator("[data-testid=approve-edited]").click();
    await expect.poll(() => runStatus(page).innerText(), { timeout: 15_000 }).toMatch(/completed/i);
    expect(log.executed.map((l) => l.split(" ").slice(0, 3).join(" "))).toEqual(["send_payment acme 42"]);
    const [decision] = (await f.client.journalAll(run.id)).filter((e) => e.type === "approval.decided");
    expect(decision.data).toMatchObject({ proposed: { to: "acme", amount: 120 }, approved: { to: "acme", amount: 42 }, edited: true, actor: expect.any(String) });
    await opened.close();
  }, 90_000);
});
