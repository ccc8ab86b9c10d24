import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { TalkingModel, waitUntil } from "../../src/testing/index.js";
import { buildDashboard, launchChromium, openDashboard, runBrowserSuites } from "./browser-harness.js";

/**
 * A person who opens a run after a pause cut its model stream sees what the model was saying when
 * it stopped: the partial text journaled with the abort, in the output panel and on the timeline.
 */

const said = "Pausing an agent must stop its stream at once, and the words it had already produced should stay visible to whoever opens the run later.";

let dir: string;
let store: SqliteStore;
let runtime: Runtime;
let server: RunningServer;
let browser: Browser;
const model = new TalkingModel(said, 16);

describe.skipIf(!runBrowserSuites)("partial text of an aborted model call (browser)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-partial-"));
    await buildDashboard(join(dir, "dashboard"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: [toolLoopAgent({ name: "talker", model })], resolveModel: new ModelRegistry().resolver });
    runtime.startWorker();
    server = await startServer({ runtime, port: 0, dashboardDir: join(dir, "dashboard"), auth: { mode: "open" } });
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await runtime?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("shows what the model had said when the pause stopped it, opened after the fact", async () => {
    const run = await runtime.start("talker", "talk");
    await waitUntil(async () => model.sent === said, { what: "the model to say its piece" });
    await runtime.pause(run.id, { actor: "alice" });
    await runtime.waitFor(run.id, ["paused"]);
    // Opened only now: the live stream is long gone, so the text can only come from the journal.
    const opened = await openDashboard(browser, `${server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    await expect.poll(() => page.locator("[data-testid=stream-text]").innerText(), { timeout: 15_000 }).toContain(said);
    // On the timeline, the aborted call's details say it too.
    await page.locator('[data-testid=call][data-call-kind=model] .call-row').first().click();
    const partial = page.locator("[data-testid=partial-text]");
    await expect.poll(() => partial.count(), { timeout: 15_000 }).toBe(1);
    expect(await partial.innerText()).toContain(said);
    await opened.close();
  }, 60_000);
});
