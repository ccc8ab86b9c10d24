import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { runBrowserSuites } from "../../test/browser-availability.js";
import { packageRoot } from "../shared/package-root.js";
import { exampleHarness, type ExampleHarness } from "../shared/test-harness.js";
import { browserFlowAgent, formSiteFor } from "./agent.js";
import { browserProcessGroup, chromiumAlive } from "./browser-session.js";
import type { FormSite } from "./form-site.js";

let harness: ExampleHarness | undefined;
let site: FormSite | undefined;
afterEach(async () => {
  await harness?.dispose();
  await site?.close();
});

/** A worker process that runs the agent until its form is submitted, then waits to be killed. */
function workerSource(): string {
  const module = (path: string) => JSON.stringify(join(packageRoot(), path));
  return `
import { Runtime } from ${module("src/engine/runtime.ts")};
import { ModelRegistry } from ${module("src/models/model-registry.ts")};
import { SqliteStore } from ${module("src/stores/sqlite-store.ts")};
import { browserFlowAgent, defaultBrowserTask } from ${module("examples/browser-flow/agent.ts")};
const dir = process.argv[2];
const store = new SqliteStore({ path: dir + "/tether.db" });
const runtime = new Runtime({ store, agents: [browserFlowAgent({ dataDir: dir + "/data", tokensPerSecond: 4000 })], resolveModel: new ModelRegistry().resolver, leaseMs: 400, controlPollMs: 5 });
const run = await runtime.start("browser-flow", defaultBrowserTask);
for (;;) {
  const journal = await runtime.journal(run.id, { limit: 10000 });
  const submitted = journal.some((e) => e.type === "call.completed" && e.data.name === "submit");
  const acquired = journal.find((e) => e.type === "resource.acquired");
  if (submitted && acquired) {
    process.stdout.write(JSON.stringify({ runId: run.id, pid: acquired.data.record.pid, profileDir: acquired.data.record.profileDir }) + "\\n");
    setInterval(() => undefined, 1000);
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 10));
}
`;
}

it.skipIf(!runBrowserSuites)("a run whose worker was killed after submitting is cancelled from another process: submission withdrawn, orphaned browser killed", async () => {
  harness = exampleHarness((dataDir) => {
    site = formSiteFor(dataDir);
    return [browserFlowAgent({ dataDir, site, tokensPerSecond: 4000 })];
  });
  const script = join(harness.dir, "worker.mts");
  writeFileSync(script, workerSource());
  const tsx = fileURLToPath(import.meta.resolve("tsx"));
  // The worker's temporary files (Playwright's browser profile among them) stay inside the test's folder.
  const workerTmp = join(harness.dir, "tmp");
  mkdirSync(workerTmp);
  const worker = spawn(process.execPath, ["--import", tsx, script, harness.dir], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, TMPDIR: workerTmp } });
  const ready = await new Promise<{ runId: string; pid: number; profileDir: string }>((resolve, reject) => {
    let out = "";
    worker.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]) as { runId: string; pid: number; profileDir: string });
    });
    worker.once("exit", (code) => reject(new Error(`the worker exited early with ${code}`)));
  });
  expect(chromiumAlive(ready.pid)).toBe(true);
  expect(existsSync(ready.profileDir)).toBe(true);
  expect(site!.submissions()).toHaveLength(1);

  const exited = new Promise((resolve) => worker.once("exit", resolve));
  worker.kill("SIGKILL");
  await exited;

  harness.runtime.startWorker();
  await harness.runtime.cancel(ready.runId, { actor: "operator", reason: "worker died" });
  const cancelled = await harness.runtime.waitFor(ready.runId, ["cancelled"], { timeoutMs: 30_000 });
  expect(cancelled.report!.compensated.map((c) => c.tool)).toEqual(["submit"]);
  expect(cancelled.report!.releaseFailed).toEqual([]);
  expect(site!.submissions()).toEqual([]);
  expect(site!.submissions({ includeWithdrawn: true })[0].withdrawnAt).not.toBeNull();
  expect(chromiumAlive(ready.pid)).toBe(false);
  expect(browserProcessGroup(ready.pid)).toEqual([]);
  expect(existsSync(ready.profileDir)).toBe(false);
}, 60_000);
