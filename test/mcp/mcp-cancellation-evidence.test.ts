import { performance } from "node:perf_hooks";
import { afterEach, describe, expect, it } from "vitest";
import { mcpTools, type McpToolset } from "../../src/tools/mcp-tools.js";
import { callOnceAgent, fixtureStdio, journalOf, mcpRuntime, Traffic, until, type McpRuntime } from "./mcp-helpers.js";

/**
 * Against an MCP server (the SDK's own `McpServer`, over stdio) whose tool honours its
 * signal: what the server itself reports on stderr, and that its progress stops, show the
 * cancellation reached the tool, not just the wire.
 */
describe("MCP cancellation seen from the server (a server that honours it)", () => {
  let toolset: McpToolset | undefined;
  let rt: McpRuntime | undefined;

  afterEach(async () => {
    await rt?.close();
    await toolset?.close();
    rt = toolset = undefined;
  });

  it("a pause stops the server's work: it logs the cancellation with the reason and sends no more progress", async () => {
    const traffic = new Traffic();
    let stderr = "";
    toolset = await mcpTools(fixtureStdio, { name: "fixture", onMessage: traffic.onMessage, onStderr: (text) => (stderr += text) });
    rt = mcpRuntime([callOnceAgent("fixture-pause", { toolName: "count-slowly", input: { steps: 100, stepMs: 20 } }, toolset.tools)]);
    const { runtime } = rt;
    const run = await runtime.start("fixture-pause", "count");
    await until(async () => (await journalOf(runtime, run.id, "call.progress")).length >= 3, "three progress entries");
    const call = traffic.lastCall("count-slowly");
    const pausedAt = performance.now();
    await runtime.pause(run.id, { actor: "alice" });
    await runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    await until(() => stderr.includes(`cancelled request ${call.id}`), "the server to log the cancellation", 5_000);
    const serverSawItAfter = performance.now() - pausedAt;
    expect(stderr).toMatch(new RegExp(`cancelled request ${call.id} before step \\d+ \\(reason: pause\\)`));
    const progressAtCancel = traffic.progressFor(call).length;
    // Ten step times later: at most one notification that was already on its way.
    await new Promise((r) => setTimeout(r, 200));
    const progressLater = traffic.progressFor(call).length;
    console.log(`fixture: the server logged the cancellation within ${serverSawItAfter.toFixed(1)} ms of the pause; progress notifications ${progressAtCancel} at the cancel, ${progressLater} 200 ms later (of 100)`);
    expect(progressLater - progressAtCancel).toBeLessThanOrEqual(1);
    expect(progressLater).toBeLessThan(100);
    expect(traffic.responsesTo(call)).toEqual([]);
    expect(stderr).not.toMatch(new RegExp(`completed request ${call.id}`));
  });

  it("an isError result is a tool error the model sees; the run goes on", async () => {
    toolset = await mcpTools(fixtureStdio, { name: "fixture", onStderr: () => undefined });
    rt = mcpRuntime([callOnceAgent("fixture-refuse", { toolName: "refuse", input: { why: "not today" } }, toolset.tools)]);
    const { runtime } = rt;
    const run = await runtime.start("fixture-refuse", "try it");
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    const [failed] = await journalOf(runtime, run.id, "call.failed");
    expect(failed.data).toMatchObject({ kind: "tool", name: "refuse", error: "tool_error", message: "tool refuse failed: refused: not today" });
    const state = await runtime.state(run.id);
    expect(state.messages.find((m) => m.role === "tool")).toMatchObject({ isError: true, content: { error: "tool_error", message: "tool refuse failed: refused: not today" } });
  });

  it("arguments that do not match the server's schema are refused before the call (invalid_input), never sent", async () => {
    const traffic = new Traffic();
    toolset = await mcpTools(fixtureStdio, { name: "fixture", onMessage: traffic.onMessage, onStderr: () => undefined });
    rt = mcpRuntime([callOnceAgent("fixture-bad-input", { toolName: "count-slowly", input: { steps: "many", stepMs: 1 } }, toolset.tools)]);
    const { runtime } = rt;
    const run = await runtime.start("fixture-bad-input", "count");
    expect((await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 })).status).toBe("completed");
    const [failed] = await journalOf(runtime, run.id, "call.failed");
    expect(failed.data).toMatchObject({ kind: "tool", error: "invalid_input" });
    expect(String(failed.data.message)).toMatch(/^invalid input for tool count-slowly: steps: /);
    expect(traffic.sent("tools/call")).toEqual([]);
  });
});
