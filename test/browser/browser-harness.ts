import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { build } from "vite";
import { expect } from "vitest";
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
