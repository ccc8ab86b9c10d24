import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixtureAgents } from "../server/fixture-agents.js";
import { OffsetClock } from "../server/helpers.js";
import { type DashboardServer, openDashboard, runBrowserSuites, runStatus, startDashboardServer, until } from "./browser-harness.js";

/**
 * The two refusals of resume a person has to answer, in the browser: a stale snapshot (the
 * clock moved past the agent's `staleAfter`) and an uncertain effect (the worker stopped in the
 * middle of a tool that is neither idempotent nor checkable). The server runs in this process
 * (it needs a movable clock and a worker that can be stopped mid-call); the workers are
 * separate runtimes on the same store, as separate processes would be.
 */

let f: DashboardServer;
const clock = new OffsetClock();
/** A worker: another runtime on the store, as another process would be. */
const worker = () => f.worker({ agents: fixtureAgents({ slowMs: 3000, tokensPerSecond: 200 }), clock, leaseMs: 600, workerPollMs: 50 });

describe.skipIf(!runBrowserSuites)("dashboard: stale snapshots and uncertain effects (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-recovery", { agents: fixtureAgents(), clock, worker: false });
  }, 90_000);

  afterAll(() => f?.close());

  it("explains a stale snapshot, refreshes, and resumes anyway", async () => {
    worker();
    const run = await f.client.start("stale", "write about staleness");
    await f.waitForStatus(run.id, ["running"]);
    await f.client.pause(run.id, { reason: "lunch" });
    await f.waitForStatus(run.id, ["paused"]);
    clock.offsetMs += 120_000;

    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    await expect.poll(() => runStatus(page).getAttribute("data-status")).toBe("paused");
    await page.click("[data-testid=resume]");
    const panel = page.locator("[data-testid=stale-panel]");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(1);
    expect(await panel.innerText()).toMatch(/snapshot is \d+ s old \(stale after 60 s\)/);
    expect((await f.client.get(run.id)).status).toBe("paused");

    await page.click("[data-testid=stale-refresh]");
    await expect.poll(() => panel.innerText()).toContain("State re-read at");
    await page.click("[data-testid=resume-anyway]");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(0);
    const resumed = await f.waitForStatus(run.id, ["running", "completed"]);
    expect(["running", "completed"]).toContain(resumed.status);
    const resume = (await f.client.journalAll(run.id)).filter((e) => e.type === "control" && e.data.command === "resume");
    expect(resume.map((e) => [e.data.outcome, e.data.force ?? false])).toEqual([
      ["refused: stale_snapshot", false],
      ["applied", true],
    ]);
    // Clean-up: the run may have completed meanwhile.
    await f.client.cancel(run.id).catch(() => undefined);
    await opened.close();
  }, 60_000);

  it("offers retry, skip or mark done for an uncertain effect, and continues with the person's result", async () => {
    await f.closeWorkers();
    const first = worker();
    const run = await f.client.start("slow", "look it up");
    await until("slow_lookup to be in flight", async () => (await f.client.journalAll(run.id)).some((e) => e.type === "call.started" && e.data.name === "slow_lookup"));
    // The worker goes away in the middle of a tool that may or may not have happened.
    await first.close();
    worker();
    const paused = await f.waitForStatus(run.id, ["paused"]);
    expect(paused.statusReason).toBe("uncertain_effect");

    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    const panel = page.locator("[data-testid=uncertain-panel]");
    await expect.poll(() => panel.count(), { timeout: 10_000 }).toBe(1);
    expect(await panel.innerText()).toContain("slow_lookup");
    expect(await page.locator("[data-testid=resume]").isDisabled()).toBe(true);
    const uncertainCall = page.locator(`[data-testid=call][data-call-seq="${paused.inflight?.callSeq}"]`);
    expect(await uncertainCall.getAttribute("data-status")).toBe("uncertain");

    await page.click("[data-testid=resolve-done]");
    await page.fill("[data-testid=uncertain-panel] textarea", '{"answer": "a person looked it up"}');
    await page.click("text=Mark done and resume");
    await f.waitForStatus(run.id, ["completed"]);
    await expect.poll(() => runStatus(page).getAttribute("data-status"), { timeout: 10_000 }).toBe("completed");
    const state = await f.client.state(run.id);
    expect(state.state.messages.find((m) => m.role === "tool")).toMatchObject({ toolName: "slow_lookup", content: { answer: "a person looked it up" } });
    const resolved = (await f.client.journalAll(run.id)).find((e) => e.type === "call.resolved");
    expect(resolved?.data).toMatchObject({ decision: "done", actor: "anonymous" });
    await expect.poll(() => uncertainCall.getAttribute("data-status")).toBe("completed");
    await opened.close();
  }, 60_000);
});
