import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import type { RunView } from "../../src/server/api-types.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { buildDashboard, runBrowserSuites, launchChromium, openDashboard, until } from "./browser-harness.js";

/**
 * The runs page's "Waiting for someone" filter in a real browser: the runs that wait for a
 * person (a tripped budget, an uncertain effect), oldest wait first, with why and for how
 * long; a run a person paused is not among them, and a run that is resumed leaves the list.
 * The server runs in this process; workers are separate runtimes on the same store.
 */

let dir: string;
let store: SqliteStore;
let control: Runtime;
let server: RunningServer;
let browser: Browser;
let client: TetherClient;
const workers: Runtime[] = [];

function worker(): Runtime {
  const runtime = new Runtime({ store, agents: fixtureAgents({ slowMs: 3000, tokensPerSecond: 200, rounds: 40 }), resolveModel: new ModelRegistry().resolver, leaseMs: 600, workerPollMs: 50 });
  runtime.startWorker();
  workers.push(runtime);
  return runtime;
}

async function waitForStatus(runId: string, statuses: RunView["status"][], timeoutMs = 20_000): Promise<RunView> {
  return until(`run ${runId} to be ${statuses.join(" or ")}`, async () => {
    const run = await client.get(runId);
    return statuses.includes(run.status) ? run : undefined;
  }, timeoutMs);
}

describe.skipIf(!runBrowserSuites)("dashboard: runs waiting for someone (browser)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-dashboard-waiting-"));
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
    for (const runtime of workers) await runtime.close();
    await control?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("lists them oldest wait first with the reason and for how long; a resumed run leaves the list", async () => {
    const first = worker();
    // Oldest: a run that tripped its step budget.
    const budget = await client.start("writer", "write until the budget ends", { budgets: { maxSteps: 2 } });
    await waitForStatus(budget.id, ["paused"]);
    // Then a run whose worker went away in the middle of a tool that may or may not have happened.
    const uncertain = await client.start("slow", "look it up");
    await until("slow_lookup to be in flight", async () => (await client.journalAll(uncertain.id)).some((e) => e.type === "call.started" && e.data.name === "slow_lookup"));
    await first.close();
    worker();
    expect((await waitForStatus(uncertain.id, ["paused"])).statusReason).toBe("uncertain_effect");
    // Paused by a person, and running: neither waits for a person.
    const byHand = await client.start("writer", "write slowly");
    await waitForStatus(byHand.id, ["running"]);
    await client.pause(byHand.id, { reason: "lunch" });
    await waitForStatus(byHand.id, ["paused"]);
    const running = await client.start("writer", "keep writing");
    await waitForStatus(running.id, ["running"]);

    const opened = await openDashboard(browser, server.url, "admin");
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
    await client.resume(budget.id, { budgets: { maxSteps: 200 } });
    await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run-id"))), { timeout: 10_000 }).toEqual([uncertain.id]);
    await expect.poll(() => chip.innerText()).toMatch(/Waiting for someone\s*1/);

    for (const id of [budget.id, uncertain.id, byHand.id, running.id]) await client.cancel(id).catch(() => undefined);
    await opened.close();
  }, 90_000);
});
