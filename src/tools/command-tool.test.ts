import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import type { JournalEntry } from "../engine/store.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { harness, livingProcesses, waitUntil, type Harness } from "../testing/index.js";
import { commandTool } from "./command-tool.js";

/**
 * A tool loop agent whose one tool runs a shell command line, driven by a scripted simulated
 * model, on the real engine: a pause and a cancel stop the command's whole process group, and
 * its output is in the journal.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const duration = `300.${process.pid}7`;
const sleeping = () => livingProcesses((row) => row.args === `sleep ${duration}`);

const shell = commandTool({
  name: "shell",
  description: "Run a shell command line in the workspace.",
  input: z.object({ line: z.string() }),
  graceMs: 2000,
  command: ({ line }) => ({ shell: line }),
  result: (finished) => ({ exitCode: finished.exitCode, output: finished.stdout }),
});

const agent = toolLoopAgent({
  name: "shell-agent",
  tools: [shell],
  model: new SimulatedModel({
    tokensPerSecond: Number.POSITIVE_INFINITY,
    script: ({ turn }) =>
      turn === 0 ? { text: "Starting the long job.", toolCalls: [{ toolName: "shell", input: { line: `echo started; sleep ${duration} & sleep ${duration}` } }] } : { text: "Done." },
  }),
});

async function journalOf(runId: string): Promise<JournalEntry[]> {
  return h!.runtime.journal(runId, { limit: 100_000 });
}

/** The command of the `n`th `shell` call is running: it said so in the journal, and both sleeps are in the process table. */
async function commandRunning(runId: string, n: number): Promise<void> {
  await waitUntil(
    async () => {
      const starts = (await journalOf(runId)).filter((e) => e.type === "call.progress" && e.data.message === "started\n");
      return starts.length === n && sleeping().length === 2;
    },
    { what: `call ${n} of the shell tool to be running` },
  );
}

describe("commandTool on the engine", () => {
  it("a pause, then a cancel, each stop the command's whole process group, and its output is journaled", async () => {
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("shell-agent", "run the long job");
    await commandRunning(run.id, 1);
    const [leader] = sleeping();

    await rt.pause(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["paused"]);
    expect(sleeping()).toEqual([]);
    expect(livingProcesses((row) => row.pgid === leader.pgid)).toEqual([]);
    let journal = await journalOf(run.id);
    const output = journal.findIndex((e) => e.type === "call.progress");
    const aborted = journal.findIndex((e) => e.type === "call.aborted");
    expect(journal[output]).toMatchObject({ callSeq: 2, data: { message: "started\n", stream: "stdout", progress: 8 } });
    expect(journal[aborted]).toMatchObject({ callSeq: 2, data: { kind: "tool", name: "shell", reason: "pause" } });
    expect(output).toBeLessThan(aborted);

    // Resumed, the agent runs the command again; a cancel stops this one the same way.
    await rt.resume(run.id, { actor: "alice" });
    await commandRunning(run.id, 2);
    await rt.cancel(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["cancelled"]);
    expect(sleeping()).toEqual([]);
    journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "call.aborted").map((e) => [e.data.name, e.data.reason])).toEqual([
      ["shell", "pause"],
      ["shell", "cancel"],
    ]);
  });

  it("a halt stops the command's process group before the call is journaled as aborted", async () => {
    h = harness([agent]);
    const rt = h.runtime;
    const run = await rt.start("shell-agent", "run the long job");
    await commandRunning(run.id, 1);
    await rt.halt({ actor: "admin", agent: "shell-agent" });
    const aborted = await waitUntil(async () => (await journalOf(run.id)).find((e) => e.type === "call.aborted"), { what: "the call to be aborted" });
    expect(aborted.data).toMatchObject({ name: "shell", reason: "halted" });
    expect(sleeping()).toEqual([]);
    expect((await rt.get(run.id)).status).toBe("halted");
  });

  it("a command that finishes is the call's result, with its output in the journal", async () => {
    const echo = commandTool({ name: "echo", description: "Echo.", input: z.object({ text: z.string() }), command: ({ text }) => ({ command: "echo", args: [text] }) });
    const echoAgent = toolLoopAgent({
      name: "echo-agent",
      tools: [echo],
      model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script: ({ turn }) => (turn === 0 ? { text: "Echo.", toolCalls: [{ toolName: "echo", input: { text: "hello" } }] } : { text: "Done." }) }),
    });
    h = harness([echoAgent]);
    const run = await h.runtime.start("echo-agent", "say hello");
    expect((await h.runtime.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    const journal = await journalOf(run.id);
    expect(journal.find((e) => e.type === "call.progress")?.data).toEqual({ progress: 6, message: "hello\n", stream: "stdout" });
    const result = (await h.runtime.state(run.id)).messages.find((m) => m.role === "tool");
    expect(result).toMatchObject({ toolName: "echo", content: { exitCode: 0, stdout: "hello\n", aborted: false } });
  });
});
