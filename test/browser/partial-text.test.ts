import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { TalkingModel, waitUntil } from "../../src/testing/index.js";
import { type DashboardServer, openDashboard, runBrowserSuites, startDashboardServer } from "./browser-harness.js";

/**
 * A person who opens a run after a pause cut its model stream sees what the model was saying when
 * it stopped: the partial text journaled with the abort, in the output panel and on the timeline.
 */

const said = "Pausing an agent must stop its stream at once, and the words it had already produced should stay visible to whoever opens the run later.";

let f: DashboardServer;
const model = new TalkingModel(said, 16);

describe.skipIf(!runBrowserSuites)("partial text of an aborted model call (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("partial", { agents: [toolLoopAgent({ name: "talker", model })] });
    f.runtime.startWorker();
  }, 90_000);

  afterAll(() => f?.close());

  it("shows what the model had said when the pause stopped it, opened after the fact", async () => {
    const run = await f.runtime.start("talker", "talk");
    await waitUntil(async () => model.sent === said, { what: "the model to say its piece" });
    await f.runtime.pause(run.id, { actor: "alice" });
    await f.runtime.waitFor(run.id, ["paused"]);
    // Opened only now: the live stream is long gone, so the text can only come from the journal.
    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
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
