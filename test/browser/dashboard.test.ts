import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDraft } from "../../examples/deep-research/drafts.js";
import { TetherClient } from "../../src/client/tether-client.js";
import type { JournalEntry } from "../../src/engine/store.js";
import type { RunView } from "../../src/server/api-types.js";
import { buildDashboard, runBrowserSuites, launchChromium, openDashboard, runStatus, until, type OpenPage } from "./browser-harness.js";
import { root, serveTether, type ServedTether } from "./serve-child.js";

/**
 * The dashboard in a real browser (Debian's chromium, headless) against a real `tether serve`
 * child process: watching a run stream, pausing it, steering it, resuming it, cancelling with
 * compensation, the viewer role, and the halt switch. Writes its screenshots to a temporary
 * folder; `npm run screenshots` runs it with TETHER_SCREENSHOTS=docs/screenshots to refresh the
 * pictures the README shows.
 */

const screenshots = process.env.TETHER_SCREENSHOTS ? resolve(root, process.env.TETHER_SCREENSHOTS) : mkdtempSync(join(tmpdir(), "tether-screenshots-"));
const question = "How should a long-running agent undo its side effects when it is cancelled?";
const note = "Focus on primary sources, please.";

let server: ServedTether;
let browser: Browser;
let cwd: string;
const clients = {} as Record<"admin" | "operator" | "viewer", TetherClient>;

async function openAs(role: "admin" | "operator" | "viewer", path = "/"): Promise<OpenPage> {
  const opened = await openDashboard(browser, `${server.url}${path}#token=${server.tokens[role].token}`, role);
  // The token left the address bar and lives in session storage.
  expect(opened.page.url()).not.toContain("token=");
  expect(await opened.page.evaluate(() => sessionStorage.getItem("tether.token"))).toBe(server.tokens[role].token);
  return opened;
}

async function journal(runId: string): Promise<JournalEntry[]> {
  return clients.operator.journalAll(runId);
}

async function waitForStatus(runId: string, statuses: RunView["status"][], timeoutMs = 30_000): Promise<RunView> {
  return until(`run ${runId} to be ${statuses.join(" or ")}`, async () => {
    const run = await clients.operator.get(runId);
    return statuses.includes(run.status) ? run : undefined;
  }, timeoutMs);
}

/** Samples the live text until one streaming model call is seen to grow. */
async function watchTextGrow(page: Page): Promise<{ callSeq: string; from: number; to: number }> {
  const seen = new Map<string, number>();
  return until("the model text to grow while it streams", async () => {
    const text = page.locator("[data-testid=stream-text]");
    if (!(await text.count())) return undefined;
    const [callSeq, streaming, content] = await Promise.all([text.getAttribute("data-call-seq"), text.getAttribute("data-streaming"), text.innerText()]);
    if (!callSeq || streaming !== "true") return undefined;
    const before = seen.get(callSeq);
    seen.set(callSeq, content.length);
    return before !== undefined && before > 0 && content.length > before ? { callSeq, from: before, to: content.length } : undefined;
  }, 30_000, 60);
}

describe.skipIf(!runBrowserSuites)("dashboard (browser, against tether serve)", () => {
  beforeAll(async () => {
    await buildDashboard();
    cwd = mkdtempSync(join(tmpdir(), "tether-dashboard-"));
    server = await serveTether(cwd, { tokensPerSecond: 100 });
    for (const role of ["admin", "operator", "viewer"] as const) clients[role] = new TetherClient({ baseUrl: server.url, token: server.tokens[role].token });
    browser = await launchChromium();
    mkdirSync(screenshots, { recursive: true });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  let steeredRun = "";

  it("starts a run, streams its text, pauses it, steers it and resumes it to the end", async () => {
    const opened = await openAs("operator");
    const { page } = opened;
    await page.click("[data-testid=start-run]");
    await page.locator(".agent-option", { hasText: "deep-research" }).click();
    await page.fill("[data-testid=start-input]", question);
    await page.click("[data-testid=start-submit]");
    await page.waitForURL(/\/runs\/run_[0-9a-f]+$/);
    steeredRun = page.url().split("/runs/")[1];

    // The model's text grows as it streams, with no reload.
    const grew = await watchTextGrow(page);
    expect(grew.to).toBeGreaterThan(grew.from);
    await expect.poll(() => page.locator("[data-testid=call]").count()).toBeGreaterThan(0);

    // Pause with a reason: the UI and the API agree, and nothing streams any more.
    // A few steps in, so there is a history to look at while paused.
    await until("a later model call to pause in", async () => {
      const streaming = page.locator("[data-testid=stream-text][data-streaming=true]");
      return (await streaming.count()) > 0 && Number(await streaming.getAttribute("data-call-seq")) >= 7;
    }, 60_000, 20);
    await page.fill("[data-testid=reason]", "checking the sources");
    await page.click("[data-testid=pause]");
    await expect.poll(() => runStatus(page).getAttribute("data-status"), { timeout: 15_000 }).toBe("paused");
    expect((await clients.operator.get(steeredRun)).status).toBe("paused");
    await expect.poll(() => page.locator("[data-testid=paused-panel]").count()).toBe(1);
    expect(await page.locator("[data-testid=pause]").isDisabled()).toBe(true);
    expect(await page.locator("[data-testid=resume]").isEnabled()).toBe(true);
    const textAtPause = await page.locator("[data-testid=stream-text]").innerText();
    const entriesAtPause = (await journal(steeredRun)).length;
    await page.waitForTimeout(1500);
    expect(await page.locator("[data-testid=stream-text]").innerText()).toBe(textAtPause);
    expect(await page.locator("[data-testid=stream-text]").getAttribute("data-streaming")).toBe("false");
    const afterWait = await journal(steeredRun);
    expect(afterWait.length).toBe(entriesAtPause);
    expect(afterWait.filter((e) => e.type === "call.started").length).toBe(afterWait.filter((e) => e.type !== "call.started" && e.type.startsWith("call.") && e.type !== "call.progress").length);

    // Steer it: a message for the agent, and an edit of the vars (a bad one first).
    await page.fill("[data-testid=message-input]", note);
    await page.click("[data-testid=add-message]");
    await expect.poll(() => page.locator("[data-testid=messages]").innerText()).toContain(note);
    const state = await clients.operator.state(steeredRun);
    const added = state.state.messages[state.state.messages.length - 1];
    expect(added).toMatchObject({ role: "user", content: note, author: server.tokens.operator.name });

    await page.fill("[data-testid=vars-input]", "{ not json");
    await page.click("[data-testid=save-vars]");
    await expect.poll(() => page.locator("[data-testid=vars-error]").innerText()).toContain("Not valid JSON");
    await page.fill("[data-testid=vars-input]", JSON.stringify({ ...state.state.vars, focus: "primary sources" }, null, 2));
    await page.click("[data-testid=save-vars]");
    await until("the vars edit to reach the state", async () => (await clients.operator.state(steeredRun)).state.vars.focus === "primary sources");
    await expect.poll(() => page.locator("[data-testid=timeline]").innerText()).toContain(`${server.tokens.operator.name} edited the state`);

    await page.setViewportSize({ width: 1440, height: 1200 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(200);
    await page.screenshot({ path: join(screenshots, "paused-run.png") });
    await page.setViewportSize({ width: 1440, height: 900 });

    // Resume: it runs on to the end, and the report it publishes took the note in.
    await page.keyboard.press("r");
    await expect.poll(() => runStatus(page).getAttribute("data-status"), { timeout: 10_000 }).not.toBe("paused");
    const done = await waitForStatus(steeredRun, ["completed", "failed", "paused"], 90_000);
    expect(done.status).toBe("completed");
    await expect.poll(() => runStatus(page).getAttribute("data-status"), { timeout: 10_000 }).toBe("completed");
    const published = parseDraft(readFileSync(join(server.dataDir, "deep-research", "published", `${steeredRun}.md`), "utf8"));
    expect(published.body).toContain(note);

    // The audit trail says who paused, with the reason, and who resumed.
    const audit = page.locator("[data-testid=audit-trail]");
    await expect.poll(() => audit.locator("li[data-action=pause]").innerText()).toContain("checking the sources");
    expect(await audit.locator("li[data-action=pause]").innerText()).toContain(server.tokens.operator.name);
    expect(await audit.locator("li[data-action=resume]").count()).toBe(1);
    await opened.close();
  }, 150_000);

  it("forks a new run from a completed step", async () => {
    expect(steeredRun).not.toBe("");
    const opened = await openAs("operator", `/runs/${steeredRun}`);
    const { page } = opened;
    const call = page.locator("[data-testid=call][data-call-kind=tool][data-status=completed]").nth(1);
    await call.locator(".call-row").click();
    const fork = call.locator("[data-testid=fork]");
    const step = Number(/step (\d+)/.exec((await fork.innerText()) ?? "")?.[1]);
    expect(step).toBeGreaterThan(0);
    await fork.click();
    await page.waitForURL((url) => /\/runs\/run_[0-9a-f]+$/.test(url.pathname) && !url.pathname.endsWith(steeredRun));
    const forkedId = page.url().split("/runs/")[1];
    const forked = await clients.operator.get(forkedId);
    expect(forked.forkedFrom).toEqual({ runId: steeredRun, step });
    await expect.poll(() => page.locator("[data-testid=timeline]").innerText()).toContain(`Forked from ${steeredRun} at step ${step}`);
    // Clean-up: the fork may have run to its end meanwhile.
    await clients.operator.cancel(forkedId).catch(() => undefined);
    await waitForStatus(forkedId, ["cancelled", "completed"]);
    await opened.close();
  }, 60_000);

  it("cancels after a preview of the compensations, shows them done, and the draft is discarded", async () => {
    const run = await clients.operator.start("deep-research", "What makes a cancel clean?");
    // Stop it just after it wrote its draft, so there is an effect to undo (pausing is part of the API contract, not the UI under test here).
    await until("the draft to be written", async () => (await journal(run.id)).some((e) => e.type === "call.completed" && e.data.name === "write_draft"), 60_000, 20);
    await clients.operator.pause(run.id, { reason: "about to cancel" });
    await waitForStatus(run.id, ["paused"]);
    const draftPath = join(server.dataDir, "deep-research", "drafts", `${run.id}.md`);
    expect(parseDraft(readFileSync(draftPath, "utf8")).header.status).not.toBe("discarded");

    const opened = await openAs("operator", `/runs/${run.id}`);
    const { page } = opened;
    await expect.poll(() => runStatus(page).getAttribute("data-status")).toBe("paused");
    await page.keyboard.press("c");
    const dialog = page.locator("[data-testid=cancel-dialog]");
    // The dialog reads the preview from the server when it opens: on a loaded machine that takes more than expect.poll's default second.
    await expect.poll(() => dialog.locator("[data-testid=compensation]").count(), { timeout: 15_000 }).toBeGreaterThan(0);
    const preview = await clients.operator.cancelPreview(run.id);
    const rows = dialog.locator("[data-testid=compensation]");
    expect(await rows.evaluateAll((els) => els.map((el) => Number(el.getAttribute("data-call-seq"))))).toEqual(preview.compensations.map((c) => c.callSeq));
    expect(await rows.first().innerText()).toContain(preview.compensations[0].tool);
    expect(preview.compensations.map((c) => c.tool)).toContain("write_draft");
    expect(await rows.evaluateAll((els) => els.map((el) => el.getAttribute("data-state")))).toEqual(preview.compensations.map(() => "pending"));

    await page.fill("[data-testid=cancel-reason]", "wrong question");
    await page.click("[data-testid=confirm-cancel]");
    await expect.poll(() => dialog.locator("[data-testid=cancel-done]").count(), { timeout: 30_000 }).toBe(1);
    expect(await rows.evaluateAll((els) => els.map((el) => el.getAttribute("data-state")))).toEqual(preview.compensations.map(() => "compensated"));
    expect(await dialog.locator("[data-testid=cancel-done]").innerText()).toContain("Everything listed was undone");

    const cancelled = await clients.operator.get(run.id);
    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.report?.compensated.map((c) => c.tool)).toContain("write_draft");
    // The side effect is undone outside the browser too: the draft is marked discarded, not deleted.
    expect(parseDraft(readFileSync(draftPath, "utf8")).header.status).toBe("discarded");

    await page.keyboard.press("Escape");
    await expect.poll(() => page.locator("[data-testid=cancel-report]").innerText()).toContain("write_draft");
    const drafted = page.locator(`[data-testid=call][data-call-seq="${preview.compensations[preview.compensations.length - 1].callSeq}"]`);
    expect(await drafted.getAttribute("data-status")).toBe("compensated");
    await expect.poll(() => page.locator("[data-testid=audit-trail] li[data-action=cancel]").innerText()).toContain("wrong question");
    for (const button of ["pause", "resume", "cancel"]) expect(await page.locator(`[data-testid=${button}]`).isDisabled()).toBe(true);
    await opened.close();
  }, 120_000);

  it("shows what a pausing run waits for, with a ticking timer", async () => {
    const run = await clients.operator.start("slow", "look it up slowly");
    const opened = await openAs("operator", `/runs/${run.id}`);
    const { page } = opened;
    await expect.poll(() => page.locator("[data-testid=tool-running]").count(), { timeout: 15_000 }).toBe(1);
    await page.keyboard.press("p");
    const panel = page.locator("[data-testid=pausing-panel]");
    await expect.poll(() => panel.count(), { timeout: 5_000 }).toBe(1);
    expect(await panel.innerText()).toContain("slow_lookup");
    // Milliseconds, whether the timer shows "212 ms" or "1.4 s".
    const parse = (text: string) => {
      const seconds = /([\d.]+) s\b/.exec(text)?.[1];
      return seconds !== undefined ? Number(seconds) * 1000 : Number(/(\d+) ms/.exec(text)?.[1] ?? "NaN");
    };
    const first = parse(await panel.locator("[data-testid=waiting-timer]").innerText());
    await page.waitForTimeout(600);
    expect(parse(await panel.locator("[data-testid=waiting-timer]").innerText())).toBeGreaterThan(first);
    await expect.poll(() => runStatus(page).getAttribute("data-status"), { timeout: 15_000 }).toBe("paused");
    await clients.operator.cancel(run.id);
    await opened.close();
  }, 60_000);

  it("lets a person raise the budget a run paused on, and resume it", async () => {
    const run = await clients.operator.start("deep-research", "How far do three steps go?", { budgets: { maxSteps: 3 } });
    const paused = await waitForStatus(run.id, ["paused"], 60_000);
    expect(paused.statusReason).toMatch(/^budget_steps/);
    const opened = await openAs("operator", `/runs/${run.id}`);
    const { page } = opened;
    await expect.poll(() => page.locator("[data-testid=meter-steps]").innerText()).toContain("3 / 3");
    await page.fill("[data-testid=raise-steps]", "60");
    await page.click("[data-testid=raise-and-resume]");
    await expect.poll(async () => (await clients.operator.get(run.id)).budgets.maxSteps, { timeout: 10_000 }).toBe(60);
    await expect.poll(() => page.locator("[data-testid=meter-steps]").innerText(), { timeout: 10_000 }).toContain("/ 60");
    await until("the run to go past its old budget", async () => (await clients.operator.get(run.id)).step > 3, 30_000);
    // Clean-up: the run may have ended meanwhile.
    await clients.operator.cancel(run.id).catch(() => undefined);
    await opened.close();
  }, 90_000);

  it("shows the server's refusal of a state edit that breaks the agent's schema", async () => {
    const run = await clients.operator.start("writer", "write something");
    await waitForStatus(run.id, ["running"]);
    await clients.operator.pause(run.id);
    await waitForStatus(run.id, ["paused"]);
    const opened = await openAs("operator", `/runs/${run.id}`);
    const { page } = opened;
    await expect.poll(() => page.locator("[data-testid=vars-input]").count()).toBe(1);
    await page.fill("[data-testid=vars-input]", JSON.stringify({ topic: 42 }));
    await page.click("[data-testid=save-vars]");
    await expect.poll(() => page.locator("[data-testid=vars-error]").innerText()).toContain("schema");
    expect((await clients.operator.state(run.id)).state.vars.topic).toBeUndefined();
    await opened.close();
  }, 60_000);

  it("gives a viewer the whole view but no control, and the API refuses it too", async () => {
    const run = await clients.operator.start("deep-research", "What does a viewer see?");
    await waitForStatus(run.id, ["running"]);
    await clients.operator.pause(run.id, { reason: "for the viewer" });
    await waitForStatus(run.id, ["paused"]);
    const opened = await openAs("viewer", `/runs/${run.id}`);
    const { page } = opened;
    await expect.poll(() => runStatus(page).getAttribute("data-status")).toBe("paused");
    for (const button of ["pause", "resume", "cancel"]) expect(await page.locator(`[data-testid=${button}]`).isDisabled()).toBe(true);
    expect(await page.locator("[data-testid=resume]").getAttribute("title")).toContain("viewer");
    expect(await page.locator("[data-testid=message-input]").count()).toBe(0);
    await page.keyboard.press("r");
    await page.waitForTimeout(300);
    expect((await clients.operator.get(run.id)).status).toBe("paused");
    const refused = await clients.viewer.resume(run.id).then(
      () => undefined,
      (error: { status?: number; code?: string }) => error,
    );
    expect(refused).toMatchObject({ status: 403, code: "forbidden" });
    await page.click(".nav-link:has-text(\"Runs\")");
    expect(await page.locator("[data-testid=start-run]").isDisabled()).toBe(true);
    await opened.close();
  }, 60_000);

  it("asks for a token when the server needs one, and says why one is refused", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(server.url);
    await expect.poll(() => page.locator("[data-testid=token-input]").count(), { timeout: 10_000 }).toBe(1);
    await page.fill("[data-testid=token-input]", "not-a-token");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator(".error-text").innerText(), { timeout: 10_000 }).toContain("not valid");
    await page.fill("[data-testid=token-input]", server.tokens.viewer.token);
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("[data-testid=role]").textContent(), { timeout: 10_000 }).toBe("viewer");
    await page.reload();
    await expect.poll(() => page.locator("[data-testid=role]").textContent(), { timeout: 10_000 }).toBe("viewer");
    await context.close();
  }, 30_000);

  it("says a run does not exist, and stops asking for its events", async () => {
    const { page, close } = await openAs("viewer", "/runs/run_nope");
    const streams: string[] = [];
    page.on("request", (request) => {
      if (request.url().includes("/runs/run_nope/events")) streams.push(request.url());
    });
    await expect.poll(() => page.locator("h2").first().innerText(), { timeout: 10_000 }).toBe("No run run_nope");
    const asked = streams.length;
    // The stream retries a dropped connection every 2 s: two of its periods pass with no request.
    await page.waitForTimeout(4500);
    expect(streams.length).toBe(asked);
    await close();
  }, 30_000);

  it("lists runs live with their status, and takes the screenshot", async () => {
    const opened = await openAs("operator");
    const { page } = opened;
    // Started once the page is open, so that it is still running when the page first shows it.
    const running = await clients.operator.start("code-agent", "Fix the failing test in the workspace.");
    const row = page.locator(`tr[data-run-id="${running.id}"]`);
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => row.locator("[data-testid=run-status]").getAttribute("data-status"), { timeout: 10_000 }).toBe("running");
    // Live: a run started elsewhere appears, and its status changes arrive, without a reload.
    const other = await clients.operator.start("browser-flow", "Book the cheapest refundable ticket on the demo site.");
    await expect.poll(() => page.locator(`tr[data-run-id="${other.id}"]`).count(), { timeout: 10_000 }).toBe(1);
    await clients.operator.pause(other.id, { reason: "later" });
    await expect.poll(() => page.locator(`tr[data-run-id="${other.id}"] [data-testid=run-status]`).getAttribute("data-status"), { timeout: 10_000 }).toBe("paused");
    await page.click("[data-filter=paused]");
    expect(await page.locator(`tr[data-run-id="${running.id}"]`).count()).toBe(0);
    await page.click("[data-filter=all]");
    await until("the code agent to have used some tokens", async () => (await clients.operator.get(running.id)).usage.outputTokens > 0);
    await page.waitForTimeout(400);
    await page.screenshot({ path: join(screenshots, "runs-list.png") });
    // Clean-up: the run may have ended meanwhile.
    await clients.operator.cancel(running.id).catch(() => undefined);
    await opened.close();
  }, 60_000);

  it("halts everything from the operator view (admin only), and lifts it", async () => {
    const asOperator = await openAs("operator", "/operator");
    expect(await asOperator.page.locator("[data-testid=halt-reason]").isDisabled()).toBe(true);
    await asOperator.close();

    const opened = await openAs("admin", "/operator");
    const { page } = opened;
    await page.fill("[data-testid=halt-reason]", "provider incident");
    await page.click("[data-testid=halt-button]");
    await page.fill("[data-testid=halt-typed]", "HALT");
    // The run starts only now, so that it is still running when the halt comes: the model keeps
    // its pace whatever the machine's load, and a loaded browser can take longer than the run.
    const run = await clients.operator.start("deep-research", "Anything, to be halted.");
    await waitForStatus(run.id, ["running"]);
    await page.click("[data-testid=halt-confirm-button]");
    await waitForStatus(run.id, ["halted"]);
    await expect.poll(() => page.locator("[data-testid=halt-banner]").innerText(), { timeout: 10_000 }).toContain("provider incident");
    await expect.poll(() => page.locator(`[data-testid=halted-runs]`).innerText(), { timeout: 10_000 }).toContain(run.id.slice(0, 10));
    await page.click("[data-testid=lift-halt]");
    await page.click("[data-testid=lift-confirm-button]");
    await waitForStatus(run.id, ["paused"]);
    await expect.poll(() => page.locator("[data-testid=halt-banner]").count(), { timeout: 10_000 }).toBe(0);
    await clients.admin.cancel(run.id);
    await opened.close();
  }, 60_000);
});
