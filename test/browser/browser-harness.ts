import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { build } from "vite";
import { expect } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime, type RuntimeOptions } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import type { RunView } from "../../src/server/api-types.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { chromiumPath } from "../browser-availability.js";
import { root } from "./serve-child.js";

/** What the browser suites share: Debian's chromium, the dashboard build, and patient polling. */

export { chromiumPath, hasChromium, runBrowserSuites } from "../browser-availability.js";

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
}

/** Builds the dashboard as `npm run build` does (to `dist/dashboard`), or to `outDir`. */
export async function buildDashboard(outDir?: string): Promise<void> {
  await build({ configFile: join(root, "dashboard", "vite.config.ts"), logLevel: "warn", ...(outDir ? { build: { outDir, emptyOutDir: true } } : {}) });
}

/** A runtime's options on the fixture's store (`resolveModel` defaults to the model registry's). */
export type RuntimeOn = Omit<RuntimeOptions, "store" | "resolveModel"> & Partial<Pick<RuntimeOptions, "resolveModel">>;

/**
 * What most browser suites start from: a SQLite store in a fresh folder, a runtime, the API and
 * the dashboard served by this process (open mode), a client of that API, and Chromium.
 */
export interface DashboardServer {
  readonly dir: string;
  readonly store: SqliteStore;
  /** The runtime the server runs on (it executes runs once its `startWorker()` is called, or not at all with `worker: false`). */
  readonly runtime: Runtime;
  readonly server: RunningServer;
  readonly client: TetherClient;
  readonly browser: Browser;
  /** Starts a worker: another runtime on the same store, as another process would be; closed with the rest unless closed before. */
  worker(options: RuntimeOn): Runtime;
  /** Closes every worker started so far (as if their processes went away). */
  closeWorkers(): Promise<void>;
  /** Run `runId` once it has one of `statuses`, read through the API. */
  waitForStatus(runId: string, statuses: readonly RunView["status"][], timeoutMs?: number): Promise<RunView>;
  /** Closes the browser, the server, the workers and the runtime, and deletes the folder. */
  close(): Promise<void>;
}

export async function startDashboardServer(name: string, runtime: RuntimeOn, options: { heartbeatMs?: number } = {}): Promise<DashboardServer> {
  const dir = mkdtempSync(join(tmpdir(), `tether-${name}-`));
  const opened: { store?: SqliteStore; runtime?: Runtime; server?: RunningServer; browser?: Browser } = {};
  const workers: Runtime[] = [];
  const closeWorkers = async () => {
    for (const worker of workers.splice(0)) await worker.close();
  };
  const on = (store: SqliteStore, options: RuntimeOn) => new Runtime({ resolveModel: new ModelRegistry().resolver, ...options, store });
  const close = async () => {
    await opened.browser?.close();
    await opened.server?.close();
    await closeWorkers();
    await opened.runtime?.close();
    await opened.store?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await buildDashboard(join(dir, "dashboard"));
    const store = (opened.store = new SqliteStore({ path: join(dir, "tether.db") }));
    opened.runtime = on(store, runtime);
    const server = (opened.server = await startServer({ runtime: opened.runtime, port: 0, dashboardDir: join(dir, "dashboard"), heartbeatMs: options.heartbeatMs ?? 1000, auth: { mode: "open" } }));
    const client = new TetherClient({ baseUrl: server.url });
    opened.browser = await launchChromium();
    return {
      dir,
      store,
      runtime: opened.runtime,
      server,
      client,
      browser: opened.browser,
      worker(options) {
        const worker = on(store, options);
        worker.startWorker();
        workers.push(worker);
        return worker;
      },
      closeWorkers,
      waitForStatus: (runId, statuses, timeoutMs = 20_000) =>
        until(`run ${runId} to be ${statuses.join(" or ")}`, async () => {
          const run = await client.get(runId);
          return statuses.includes(run.status) ? run : undefined;
        }, timeoutMs),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

export interface OpenPage {
  context: BrowserContext;
  page: Page;
  /** Closes the page, failing the test if the app threw meanwhile. */
  close(): Promise<void>;
}

/** A fresh browser context on `url`, waiting until the dashboard shows the expected role. */
export async function openDashboard(browser: Browser, url: string, role: string): Promise<OpenPage> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1, colorScheme: "light", reducedMotion: "reduce" });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(url);
  await expect.poll(() => page.locator("[data-testid=role]").textContent(), { timeout: 15_000 }).toBe(role);
  return {
    context,
    page,
    close: async () => {
      await context.close();
      expect(errors).toEqual([]);
    },
  };
}

export function runStatus(page: Page) {
  return page.locator(".run-title [data-testid=run-status]");
}
