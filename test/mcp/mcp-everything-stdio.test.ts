import { performance } from "node:perf_hooks";
import { afterEach, describe, expect, it } from "vitest";
import { mcpTools, type McpToolset } from "../../src/tools/mcp-tools.js";
import { callOnceAgent, everythingStdio, journalOf, mcpRuntime, processAlive, Traffic, until, type McpRuntime } from "./mcp-helpers.js";

const longOp = "ev_trigger-long-running-operation";
const mcpLongOp = "trigger-long-running-operation";
/** 15 steps of 100 ms: progress every 100 ms, the result after 1.5 s. */
const longInput = { duration: 1.5, steps: 15 };

/**
 * Against the real `@modelcontextprotocol/server-everything` over stdio. Its long-running tool
 * keeps looping after a cancellation (it does not look at its signal), but the SDK server
 * aborts the request's handler on `notifications/cancelled` and never sends its result: that
 * missing response is the server-side evidence that the cancellation arrived.
 */
describe("MCP tools over stdio (server-everything)", () => {
  let toolset: McpToolset | undefined;
  let rt: McpRuntime | undefined;

  afterEach(async () => {
    await rt?.close();
    await toolset?.close();
    rt = toolset = undefined;
  });

  it("lists the server's tools as prefixed Tether tools with its own input schemas", async () => {
    toolset = await mcpTools(everythingStdio, { name: "everything", prefix: "ev_" });
    const names = toolset.tools.map((t) => t.name);
    expect(names).toContain(longOp);
    expect(names).toContain("ev_echo");
    // It requires MCP's task API (tools/call cannot run it), so it is not offered to models.
    expect(names).not.toContain("ev_simulate-research-query");
    const long = toolset.tools.find((t) => t.name === longOp)!;
    expect(long.abortable).toBe(true);
    expect(long.spec.inputSchema).toMatchObject({ type: "object", properties: { duration: { type: "number" }, steps: { type: "number" } } });
    const echo = toolset.tools.find((t) => t.name === "ev_echo")!;
    expect(echo.input.safeParse({ message: 7 }).success).toBe(false);
    expect(await echo.execute({ message: "hi" }, { runId: "r", idempotencyKey: "k", signal: new AbortController().signal, fencingToken: 1, progress: () => undefined, resource: () => undefined as never })).toBe("Echo: hi");
  });

  it("a pause mid-call sends notifications/cancelled, the server drops the call, progress is journaled, and resume runs it again to completion", async () => {
    const traffic = new Traffic();
    toolset = await mcpTools(everythingStdio, { name: "everything", prefix: "ev_", include: [mcpLongOp], onMessage: traffic.onMessage });
    rt = mcpRuntime([callOnceAgent("mcp-pause", { toolName: longOp, input: longInput }, toolset.tools)]);
    const { runtime } = rt;
    const run = await runtime.start("mcp-pause", "run the long operation");
    await until(async () => (await journalOf(runtime, run.id, "call.progress")).length >= 2, "two progress entries");
    const call = traffic.lastCall(mcpLongOp);
    const pausedAt = performance.now();
    await runtime.pause(run.id, { actor: "alice" });
    const paused = await runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    const pausedSeenAt = performance.now();
    const pausedIn = pausedSeenAt - pausedAt;

    const [cancelled] = traffic.sent("notifications/cancelled");
    expect(cancelled).toMatchObject({ method: "notifications/cancelled", session: call.session, params: { requestId: call.id, reason: "pause" } });
    console.log(`stdio: pause → notifications/cancelled sent after ${(cancelled.at - pausedAt).toFixed(1)} ms; run paused after ${pausedIn.toFixed(1)} ms`);
    // Order, not latency (the benchmark measures that): sent after the pause was asked, before the run read paused.
    expect(cancelled.at).toBeGreaterThanOrEqual(pausedAt);
    expect(cancelled.at).toBeLessThanOrEqual(pausedSeenAt);
    expect(paused.statusReason).toBe("paused by alice");

    const journal = await runtime.journal(run.id);
    const progress = journal.filter((e) => e.type === "call.progress");
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress[0].data).toEqual({ progress: 1, total: 15 });
    const [aborted] = journal.filter((e) => e.type === "call.aborted");
    expect(aborted.data).toMatchObject({ kind: "tool", name: longOp, reason: "pause" });
    expect(progress.every((p) => p.callSeq === aborted.callSeq)).toBe(true);

    // Well past the time the operation would have finished, the server never answered the call.
    const startedAt = traffic.sent("tools/call").at(-1)!.at;
    await until(() => performance.now() - startedAt > 2_000, "the operation's full duration");
    expect(traffic.responsesTo(call)).toEqual([]);
    const afterCancel = traffic.progressFor(call).filter((p) => p.at > cancelled.at).length;
    console.log(`stdio: server-everything sent ${afterCancel} progress notifications after the cancellation (its tool ignores its signal) and no result`);

    // Resume re-issues the aborted call (a new request), which the server completes.
    await runtime.resume(run.id, { actor: "alice" });
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    const retry = traffic.lastCall(mcpLongOp);
    expect(retry).not.toEqual(call);
    expect(traffic.responsesTo(retry)).toHaveLength(1);
    const completed = (await journalOf(runtime, run.id, "call.completed")).filter((e) => e.data.kind === "tool");
    expect(completed).toHaveLength(1);
    expect(done.output).toBe('Result: "Long running operation completed. Duration: 1.5 seconds, Steps: 15."');
  });

  it("a cancel mid-call sends notifications/cancelled with reason cancel and closes the run's own connection", async () => {
    const traffic = new Traffic();
    toolset = await mcpTools(everythingStdio, { name: "everything", prefix: "ev_", include: [mcpLongOp], onMessage: traffic.onMessage });
    rt = mcpRuntime([callOnceAgent("mcp-cancel", { toolName: longOp, input: longInput }, toolset.tools, [toolset.resource])]);
    const { runtime } = rt;
    const run = await runtime.start("mcp-cancel", "run the long operation");
    await until(async () => (await journalOf(runtime, run.id, "call.progress")).length >= 1, "a progress entry");
    const [acquired] = await journalOf(runtime, run.id, "resource.acquired");
    const runPid = Number((acquired.data.record as { pid: number }).pid);
    expect(runPid).not.toBe(toolset.connection.pid);
    expect(processAlive(runPid)).toBe(true);
    const call = traffic.lastCall(mcpLongOp);

    await runtime.cancel(run.id, { actor: "bob", reason: "not needed" });
    const cancelled = await runtime.waitFor(run.id, ["cancelled"], { timeoutMs: 10_000 });
    expect(cancelled.status).toBe("cancelled");
    expect(traffic.sent("notifications/cancelled")).toMatchObject([{ session: call.session, params: { requestId: call.id, reason: "cancel" } }]);
    const journal = await runtime.journal(run.id);
    expect(journal.filter((e) => e.type === "call.aborted")[0].data).toMatchObject({ kind: "tool", name: longOp, reason: "cancel" });
    expect(journal.filter((e) => e.type === "resource.released")[0].data).toMatchObject({ name: "mcp:everything", forPause: false });
    // The run's session is over: its server process is gone, the shared one is untouched.
    await until(() => !processAlive(runPid), "the run's MCP server process to exit", 5_000);
    expect(toolset.connection.connected).toBe(true);
    expect(traffic.responsesTo(call)).toEqual([]);
  });

  it("killing the server mid-call fails the call cleanly and pauses the run (tool_unavailable); resume reconnects and completes", async () => {
    const traffic = new Traffic();
    toolset = await mcpTools(everythingStdio, { name: "everything", prefix: "ev_", include: [mcpLongOp], onMessage: traffic.onMessage });
    rt = mcpRuntime([callOnceAgent("mcp-kill", { toolName: longOp, input: { duration: 0.6, steps: 6 } }, toolset.tools)]);
    const { runtime } = rt;
    const run = await runtime.start("mcp-kill", "run the long operation");
    await until(async () => (await journalOf(runtime, run.id, "call.progress")).length >= 1, "a progress entry");
    const pid = toolset.connection.pid!;
    process.kill(pid, "SIGKILL");
    const paused = await runtime.waitFor(run.id, ["paused", "failed", "completed"], { timeoutMs: 10_000 });
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toMatch(/^tool_unavailable: tool ev_trigger-long-running-operation is unavailable: MCP server ".*" \(stdio\) went away during the call: MCP error -32000: Connection closed$/);
    const [failed] = await journalOf(runtime, run.id, "call.failed");
    expect(failed.data).toMatchObject({ kind: "tool", name: longOp, error: "tool_unavailable" });
    expect(processAlive(pid)).toBe(false);

    await runtime.resume(run.id, { actor: "ops", reason: "server restarted" });
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    expect(toolset.connection.pid).not.toBe(pid);
    expect(done.output).toBe('Result: "Long running operation completed. Duration: 0.6 seconds, Steps: 6."');
  });
});
