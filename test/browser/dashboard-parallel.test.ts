import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { tool } from "../../src/engine/tool.js";
import { SimulatedModel } from "../../src/models/simulated-model.js";
import { type DashboardServer, openDashboard, runBrowserSuites, startDashboardServer, until } from "./browser-harness.js";

/**
 * A run with several tool calls in flight at once (one model turn's calls, `parallelToolCalls`):
 * the run page lists them side by side while they run; a pause aborts the abortable ones and the
 * pausing panel names the call it waits for.
 */

let f: DashboardServer;
let releaseArchive: () => void = () => undefined;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(new Error("aborted"))), { once: true });
  });

const searches = [
  tool({ name: "web", description: "search the web", input: z.object({ id: z.string() }), abortable: true, execute: async (_i, { signal }) => (await sleep(60_000, signal), "web") }),
  tool({ name: "news", description: "search the news", input: z.object({ id: z.string() }), abortable: true, execute: async (_i, { signal }) => (await sleep(60_000, signal), "news") }),
  tool({ name: "archive", description: "search the archive", input: z.object({ id: z.string() }), execute: () => new Promise<string>((resolve) => (releaseArchive = () => resolve("archive"))) }),
];

const agent = toolLoopAgent({
  name: "fanout",
  tools: searches,
  model: new SimulatedModel({
    tokensPerSecond: Number.POSITIVE_INFINITY,
    script: ({ turn }) => (turn === 0 ? { text: "searching", toolCalls: searches.map((t, i) => ({ toolName: t.name, input: { id: `q${i}` } })) } : { text: "summary" }),
  }),
});

describe.skipIf(!runBrowserSuites)("dashboard: calls in flight at once (browser)", () => {
  beforeAll(async () => {
    f = await startDashboardServer("dashboard-parallel", { agents: [agent] });
  }, 90_000);

  afterAll(async () => {
    releaseArchive();
    await f?.close();
  });

  it("lists the calls in flight side by side, and a pause waits for the one it cannot abort", async () => {
    const run = await f.client.start("fanout", "tides");
    await until("three calls in flight", async () => ((await f.client.get(run.id)).inflightCalls?.length === 3 ? true : undefined));
    const opened = await openDashboard(f.browser, `${f.server.url}/runs/${run.id}`, "admin");
    const { page } = opened;
    const calls = page.locator("[data-testid=inflight-call]");
    await expect.poll(() => calls.allInnerTexts(), { timeout: 15_000 }).toEqual([
      expect.stringMatching(/^tool web \(call #2\)/),
      expect.stringMatching(/^tool news \(call #3\)/),
      expect.stringMatching(/^tool archive \(call #4\)/),
    ]);
    await f.client.pause(run.id, { reason: "check the sources" });
    await expect.poll(() => page.locator("[data-testid=pausing-panel]").innerText(), { timeout: 10_000 }).toContain("archive");
    // web and news are aborted: archive is the one call left, which the pausing panel shows alone.
    await expect.poll(() => calls.count(), { timeout: 10_000 }).toBe(0);
    releaseArchive();
    await until("the run to pause", async () => ((await f.client.get(run.id)).status === "paused" ? true : undefined));
    await f.client.cancel(run.id).catch(() => undefined);
    await opened.close();
  }, 90_000);
});
