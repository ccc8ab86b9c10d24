import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { basename, isAbsolute } from "node:path";
import type { Browser, BrowserContext, BrowserServer, Page } from "playwright-core";
import { optionalImport } from "../../src/engine/optional-import.js";
import type { Json } from "../../src/engine/json.js";
import { resource, type ResourceDefinition } from "../../src/engine/resource.js";

export const browserResourceName = "browser";

export const defaultChromiumPath = "/usr/bin/chromium";

/** Flags for headless Chromium in a container, kept offline. */
export const chromiumArgs = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export interface BrowserSession {
  runId: string;
  pid: number;
  /** The temporary profile Playwright made for it, removed with the browser. */
  profileDir: string | null;
  server: BrowserServer;
  browser: Browser;
  context: BrowserContext;
  page: Page;
}

interface SessionRecord {
  runId: string;
  pid: number;
  profileDir: string | null;
}

/**
 * Sessions this process launched, by run. A run paused without releasing its browser gets the
 * same page back when it resumes here; any other process finds only the record, and kills the pid.
 */
const sessions = new Map<string, BrowserSession>();

function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/** Is `pid` a running Chromium (not a zombie, not a pid reused by something else)? */
export function chromiumAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (process.platform === "linux") {
    const state = procState(pid);
    if (state === undefined || state === "Z" || state === "X") return false;
    try {
      return /chrom/i.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"));
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Live processes of the browser's process group (Linux): the browser and every helper it started. */
export function browserProcessGroup(pid: number): number[] {
  if (process.platform !== "linux" || !Number.isInteger(pid) || pid <= 0) return chromiumAlive(pid) ? [pid] : [];
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pid && state !== "Z" && state !== "X") members.push(Number(name));
    } catch {
      // It ended while we looked.
    }
  }
  return members;
}

/** Kills the browser and its helpers: Chromium is launched as the leader of its own process group. */
async function killBrowser(pid: number): Promise<void> {
  // A pid reused by something that is not Chromium is none of our business.
  if (!chromiumAlive(pid) && !browserProcessGroup(pid).some(chromiumAlive)) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  for (let waited = 0; waited < 5_000 && browserProcessGroup(pid).length > 0; waited += 25) await new Promise((resolve) => setTimeout(resolve, 25));
  if (browserProcessGroup(pid).length > 0) throw new Error(`browser process group ${pid} survived SIGKILL`);
}

/** The `--user-data-dir` Playwright gave the browser, if it is one of its temporary profiles. */
function profileDirOf(pid: number): string | null {
  try {
    const arg = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").find((a) => a.startsWith("--user-data-dir="));
    const dir = arg?.slice("--user-data-dir=".length);
    return dir && isPlaywrightProfile(dir) ? dir : null;
  } catch {
    return null;
  }
}

/** Only a folder named as Playwright names its temporary profiles is ever removed. */
function isPlaywrightProfile(dir: string): boolean {
  return isAbsolute(dir) && /^playwright_chromiumdev_profile-[A-Za-z0-9]+$/.test(basename(dir));
}

/** A crashed process never cleaned up its browser's profile: do it for it, once the browser is dead. */
function removeProfile(dir: string | null): void {
  if (dir && isPlaywrightProfile(dir)) rmSync(dir, { recursive: true, force: true });
}

async function closeSession(session: BrowserSession): Promise<void> {
  sessions.delete(session.runId);
  const graceful = (async () => {
    await session.browser.close().catch(() => undefined);
    await session.server.close();
  })();
  const timeout = new Promise((resolve) => setTimeout(resolve, 5_000).unref());
  await Promise.race([graceful, timeout]);
  await killBrowser(session.pid);
  removeProfile(session.profileDir);
}

async function launch(runId: string, executablePath: string): Promise<BrowserSession> {
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium is not at ${executablePath}: install Debian's chromium package (apt-get install chromium) or set TETHER_CHROMIUM to its path`);
  }
  const { chromium } = await optionalImport<typeof import("playwright-core")>("playwright-core", "the browser-flow example");
  const server = await chromium.launchServer({ executablePath, headless: true, args: chromiumArgs });
  const pid = server.process().pid;
  if (pid === undefined) {
    await server.kill();
    throw new Error(`Chromium at ${executablePath} started without a process id`);
  }
  try {
    const browser = await chromium.connect(server.wsEndpoint());
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    const page = await context.newPage();
    const session: BrowserSession = { runId, pid, profileDir: profileDirOf(pid), server, browser, context, page };
    sessions.set(runId, session);
    return session;
  } catch (error) {
    await server.kill().catch(() => undefined);
    throw error;
  }
}

/**
 * A Chromium browser with one context and page, held for the whole run (kept over a pause so
 * the page and what was typed survive). The record is the browser's pid, so a process that
 * takes the run over after a crash can kill what the dead one left.
 */
export function browserSession(options: { executablePath?: string } = {}): ResourceDefinition<BrowserSession> {
  const executablePath = options.executablePath ?? defaultChromiumPath;
  return resource<BrowserSession>({
    name: browserResourceName,
    async acquire({ runId, previous }) {
      const before = previous as SessionRecord | undefined;
      const mine = sessions.get(runId);
      if (mine && mine.browser.isConnected() && mine.pid === before?.pid && chromiumAlive(mine.pid)) return mine;
      if (mine) await closeSession(mine);
      if (before?.pid) {
        await killBrowser(before.pid);
        removeProfile(before.profileDir ?? null);
      }
      return launch(runId, executablePath);
    },
    record: (session): Json => ({ runId: session.runId, pid: session.pid, profileDir: session.profileDir }),
    async release(session, record) {
      const { runId, pid, profileDir } = record as unknown as SessionRecord;
      const live = session ?? sessions.get(runId);
      if (live && live.pid === pid) await closeSession(live);
      await killBrowser(pid);
      removeProfile(profileDir ?? null);
    },
    revalidate(record) {
      const { pid } = record as unknown as SessionRecord;
      return chromiumAlive(pid) ? true : `the browser (pid ${pid}) is gone, and the page state with it`;
    },
  });
}
