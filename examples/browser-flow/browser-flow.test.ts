import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { JournalEntry } from "../../src/engine/store.js";
import { runBrowserSuites } from "../../test/browser-availability.js";
import { completedCalls, exampleHarness, type ExampleHarness } from "../shared/test-harness.js";
import { browserFlowAgent, defaultBrowserTask, formSiteFor } from "./agent.js";
import { browserProcessGroup, browserSession, chromiumAlive, chromiumArgs, defaultChromiumPath } from "./browser-session.js";
import type { FormSite, Submission } from "./form-site.js";

let harness: ExampleHarness | undefined;
let site: FormSite | undefined;
afterEach(async () => {
  await harness?.dispose();
  await site?.close();
  harness = undefined;
  site = undefined;
});

function setup(tokensPerSecond = 4000): void {
  harness = exampleHarness((dataDir) => {
    site = formSiteFor(dataDir);
    return [browserFlowAgent({ dataDir, site, tokensPerSecond })];
  });
}

/** The pids of the browsers the run journaled; never empty, never a non-pid (a check on `NaN` would pass vacuously). */
function browserPids(journal: readonly JournalEntry[]): number[] {
  const pids = journal.filter((e) => e.type === "resource.acquired" && e.data.name === "browser").map((e) => Number((e.data.record as { pid: number }).pid));
  expect(pids.length, "the run journaled its browser").toBeGreaterThan(0);
  for (const pid of pids) expect(Number.isInteger(pid) && pid > 0, `journaled browser pid ${pid}`).toBe(true);
  return pids;
}

async function submissionsOverHttp(options: { all?: boolean } = {}): Promise<Submission[]> {
  const response = await fetch(`${await site!.start()}/api/submissions${options.all ? "?all=1" : ""}`);
  return ((await response.json()) as { submissions: Submission[] }).submissions;
}

describe.skipIf(!runBrowserSuites)("browser-flow", () => {
  it("fills in and submits the form in Chromium, then closes the browser", async () => {
    setup();
    const run = await harness!.runtime.start("browser-flow", defaultBrowserTask);
    const done = await harness!.runtime.waitFor(run.id, ["completed", "failed"], { timeoutMs: 45_000 });
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    const live = await submissionsOverHttp();
    expect(live).toHaveLength(1);
    expect(live[0].fields).toMatchObject({ name: "Ada Lovelace", email: "ada@example.com", company: "Analytical Engines Ltd", plan: "team", consent: "yes" });
    expect(live[0].key).toMatch(new RegExp(`^${run.id}:\\d+$`));
    expect(String(done.output)).toContain(`request ${live[0].id}`);
    const journal = await harness!.runtime.journal(run.id, { limit: 10_000 });
    for (const tool of ["goto", "read", "click", "fill", "submit"]) expect(completedCalls(journal, tool).length, tool).toBeGreaterThan(0);
    const [pid] = browserPids(journal);
    expect(chromiumAlive(pid)).toBe(false);
    expect(browserProcessGroup(pid)).toEqual([]);
  }, 60_000);

  it("cancelled after submitting: the submission is withdrawn and the browser process is gone", async () => {
    setup();
    const run = await harness!.runtime.start("browser-flow", defaultBrowserTask);
    const journal = await harness!.journalUntil(run.id, (j) => completedCalls(j, "submit").length === 1, 45_000);
    const [pid] = browserPids(journal);
    expect(chromiumAlive(pid)).toBe(true);
    expect(await submissionsOverHttp()).toHaveLength(1);

    await harness!.runtime.cancel(run.id, { actor: "test", reason: "wrong person" });
    const cancelled = await harness!.runtime.waitFor(run.id, ["cancelled"], { timeoutMs: 30_000 });
    expect(cancelled.report!.compensated.map((c) => c.tool)).toEqual(["submit"]);
    expect(cancelled.report!.released).toEqual(["browser"]);
    expect(await submissionsOverHttp()).toEqual([]);
    const all = await submissionsOverHttp({ all: true });
    expect(all).toHaveLength(1);
    expect(all[0].withdrawnAt).not.toBeNull();
    expect(chromiumAlive(pid)).toBe(false);
    expect(browserProcessGroup(pid)).toEqual([]);
  }, 60_000);

  it("keeps the same browser and page over a pause, and finishes after resume", async () => {
    setup(1000);
    const run = await harness!.runtime.start("browser-flow", defaultBrowserTask);
    await harness!.journalUntil(run.id, (j) => completedCalls(j, "fill").length >= 2, 45_000);
    await harness!.runtime.pause(run.id, { actor: "test" });
    await harness!.runtime.waitFor(run.id, ["paused"], { timeoutMs: 30_000 });
    const [pid] = browserPids(await harness!.runtime.journal(run.id, { limit: 10_000 }));
    expect(chromiumAlive(pid)).toBe(true);
    expect(await submissionsOverHttp()).toEqual([]);

    await harness!.runtime.resume(run.id, { actor: "test" });
    const done = await harness!.runtime.waitFor(run.id, ["completed", "failed"], { timeoutMs: 45_000 });
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    const journal = await harness!.runtime.journal(run.id, { limit: 10_000 });
    expect(new Set(browserPids(journal))).toEqual(new Set([pid]));
    expect(journal.filter((e) => e.type === "call.failed")).toEqual([]);
    expect(await submissionsOverHttp()).toHaveLength(1);
    expect(chromiumAlive(pid)).toBe(false);
  }, 90_000);
});

describe.skipIf(!runBrowserSuites)("browser session resource", () => {
  it("released from a record alone (the process that launched it is gone), it kills the browser by pid", async () => {
    const profile = mkdtempSync(join(tmpdir(), "tether-chromium-"));
    const orphan = spawn(defaultChromiumPath, ["--headless", ...chromiumArgs, `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank"], { detached: true, stdio: "ignore" });
    const exited = new Promise((resolve) => orphan.once("exit", resolve));
    try {
      const pid = orphan.pid!;
      // Chromium writes this file once it is up and serving DevTools.
      const up = () => existsSync(join(profile, "DevToolsActivePort"));
      for (let waited = 0; !up() && waited < 15_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(up()).toBe(true);
      expect(chromiumAlive(pid)).toBe(true);
      const session = browserSession();
      expect(await session.revalidate!({ runId: "run_gone", pid })).toBe(true);
      await session.release(undefined, { runId: "run_gone", pid });
      expect(chromiumAlive(pid)).toBe(false);
      expect(browserProcessGroup(pid)).toEqual([]);
      expect(await session.revalidate!({ runId: "run_gone", pid })).toMatch(/is gone/);
      await exited;
    } finally {
      if (orphan.exitCode === null) orphan.kill("SIGKILL");
      rmSync(profile, { recursive: true, force: true });
    }
  }, 30_000);
});
