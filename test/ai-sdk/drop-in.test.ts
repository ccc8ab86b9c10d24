import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createTether, SqliteStore, type JournalEntry } from "../../src/index.js";
import { startOpenAICompatibleServer, type OpenAICompatibleServer } from "../../src/testing/openai-compatible-server.js";
import { ChildWorker, projectRoot } from "../crash/child-process.js";
import { aiSdkResearcher, aiSdkToolLoop } from "./agent.js";

/**
 * The Vercel AI SDK as a drop-in: a real `streamText` agent, with the real
 * `@ai-sdk/openai-compatible` client, against a loopback server speaking the OpenAI streaming
 * format. Paused mid-stream in this process, resumed by a worker in another process.
 */
describe("an AI SDK streamText agent made durable with ctx.aiSdk", () => {
  let server: OpenAICompatibleServer;
  let dir: string;
  let child: ChildWorker | undefined;
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    await child?.stop();
    child = undefined;
    for (const c of cleanups.splice(0).reverse()) await c();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const toolTurn = { text: "Let me look that up.", toolCalls: [{ id: "call_1", name: "lookup", arguments: JSON.stringify({ query: "tether" }) }] };
  const answer = Array.from({ length: 300 }, (_, i) => `word${i}`).join(" ");
  const toolRuns = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as { query: string; pid: number }) : []);

  it("pauses mid-stream (the server sees the client close), resumes in a new process, and ends as an uninterrupted run does", async () => {
    server = await startOpenAICompatibleServer();
    dir = mkdtempSync(join(tmpdir(), "tether-aisdk-"));
    const dbPath = join(dir, "tether.db");
    const toolLogPath = join(dir, "tools.jsonl");
    const store = new SqliteStore({ path: dbPath });
    const a = createTether({ agents: [aiSdkResearcher(server.baseURL, toolLogPath)], store, workerPollMs: 20 });
    cleanups.push(async () => {
      await a.close();
      await store.close();
    });

    // The reference: the same agent, uninterrupted.
    server.enqueue(toolTurn, { text: answer });
    const reference = await a.start("ai-sdk-researcher", { question: "What is a tether?" });
    const referenceDone = await a.waitFor(reference.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(referenceDone.status).toBe("completed");
    expect(referenceDone.output).toEqual({ text: answer, steps: 2 });
    expect(server.completions).toHaveLength(2);

    // The interrupted run: the second model turn streams slowly and is paused mid-way.
    server.enqueue(toolTurn, { text: answer, chunkDelayMs: 10 });
    const run = await a.start("ai-sdk-researcher", { question: "What is a tether?" });
    await server.waitUntil(() => server.completions.length === 4 && server.completions[3].chunksSent >= 10, 20_000);
    const streaming = server.completions[3];
    await a.pause(run.id, { actor: "alice" });
    await server.waitUntil(() => streaming.closedEarlyAt !== undefined, 5_000);
    expect(streaming.endedAt).toBeUndefined();
    const paused = await a.waitFor(run.id, ["paused"], { timeoutMs: 10_000 });
    expect(paused.status).toBe("paused");
    let journal: JournalEntry[] = await a.journal(run.id, { limit: 10_000 });
    // Gates 1 and 4 read what people said before each model call (nothing: no call of their own).
    expect(journal.filter((e) => e.type === "call.completed").map((e) => [e.callSeq, e.data.kind, e.data.name])).toEqual([
      [2, "model", "wire:wire-model"],
      [3, "tool", "lookup"],
    ]);
    const aborted = journal.find((e) => e.type === "call.aborted")!;
    expect(aborted).toMatchObject({ callSeq: 5, data: { kind: "model", reason: "pause" } });
    // What the stream had produced before the pause still cost tokens: counted, estimated from what was streamed.
    expect(aborted.data).toMatchObject({ estimated: true, streamedChars: expect.any(Number) });
    const partialTokens = (aborted.data.usage as { outputTokens: number }).outputTokens;
    expect(partialTokens).toBe(Math.ceil((aborted.data.streamedChars as number) / 4));
    expect(partialTokens).toBeGreaterThan(0);
    expect(paused.usage.outputTokens).toBeGreaterThanOrEqual(partialTokens);
    await a.close();

    // Another process resumes it: the first turn and the tool replay from the journal; only the aborted turn is asked again.
    server.enqueue({ text: answer });
    child = await ChildWorker.spawn(join(projectRoot, "test/ai-sdk/child.ts"), { dbPath, baseURL: server.baseURL, toolLogPath });
    const b = createTether({ agents: [aiSdkResearcher(server.baseURL, toolLogPath)], store, worker: false });
    cleanups.push(() => b.close());
    await b.resume(run.id, { actor: "alice" });
    const done = await b.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 30_000 });
    expect(done.status).toBe("completed");
    expect(done.output).toEqual(referenceDone.output);
    expect(server.completions).toHaveLength(5);
    // The re-issued turn sent the same conversation as the aborted one.
    expect(server.completions[4].body!.messages).toEqual(streaming.body!.messages);
    // Each completed tool call ran once: one for the reference run, one for this run (in this process).
    const runs = toolRuns(toolLogPath);
    expect(runs.map((r) => r.query)).toEqual(["tether", "tether"]);
    expect(runs.every((r) => r.pid === process.pid)).toBe(true);
    journal = await b.journal(run.id, { limit: 10_000 });
    expect(journal.filter((e) => e.type === "call.completed").map((e) => [e.callSeq, e.data.name])).toEqual([
      [2, "wire:wire-model"],
      [3, "lookup"],
      [5, "wire:wire-model"],
    ]);
    expect(done.usage.outputTokens).toBeGreaterThan(0);
  });

  it("the AI SDK's ToolLoopAgent (generateText) is durable the same way: each doGenerate a model gate, each tool a tool gate, replayed on resume", async () => {
    server = await startOpenAICompatibleServer();
    dir = mkdtempSync(join(tmpdir(), "tether-aisdk-"));
    const toolLogPath = join(dir, "tools.jsonl");
    const store = new SqliteStore({ path: join(dir, "tether.db") });
    const rt = createTether({ agents: [aiSdkToolLoop(server.baseURL, toolLogPath)], store, workerPollMs: 20 });
    cleanups.push(async () => {
      await rt.close();
      await store.close();
    });
    // The second turn is slow to answer (generateText does not stream): the run is paused while it waits.
    server.enqueue(toolTurn, { text: "A tether is a rope.", responseDelayMs: 10_000 });
    const run = await rt.start("ai-sdk-tool-loop", { question: "What is a tether?" });
    await server.waitUntil(() => server.completions.length === 2, 20_000);
    const waiting = server.completions[1];
    await rt.pause(run.id, { actor: "alice" });
    await server.waitUntil(() => waiting.closedEarlyAt !== undefined, 5_000);
    const paused = await rt.waitFor(run.id, ["paused"], { timeoutMs: 10_000 });
    expect(paused.status).toBe("paused");
    server.enqueue({ text: "A tether is a rope." });
    await rt.resume(run.id, { actor: "alice" });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ text: "A tether is a rope.", steps: 2 });
    expect(toolRuns(toolLogPath).map((r) => r.query)).toEqual(["tether"]);
    const journal = await rt.journal(run.id, { limit: 10_000 });
    expect(journal.filter((e) => e.type === "call.completed").map((e) => [e.callSeq, e.data.kind, e.data.name])).toEqual([
      [2, "model", "wire:wire-model"],
      [3, "tool", "lookup"],
      [5, "model", "wire:wire-model"],
    ]);
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 5, data: { kind: "model" } });
  });

  it("a message sent to the running run reaches the model's next request as a user message, with no pause", async () => {
    server = await startOpenAICompatibleServer();
    dir = mkdtempSync(join(tmpdir(), "tether-aisdk-"));
    const toolLogPath = join(dir, "tools.jsonl");
    const store = new SqliteStore({ path: join(dir, "tether.db") });
    const rt = createTether({ agents: [aiSdkResearcher(server.baseURL, toolLogPath)], store, workerPollMs: 20 });
    cleanups.push(async () => {
      await rt.close();
      await store.close();
    });
    // The first turn is slow to answer: the message is sent while it waits.
    server.enqueue({ ...toolTurn, responseDelayMs: 1_500 }, { text: "In metres: 3." });
    const run = await rt.start("ai-sdk-researcher", { question: "How long is a tether?" });
    await server.waitUntil(() => server.completions.length === 1, 20_000);
    await rt.say(run.id, "Answer in metric units.", { actor: "alice" });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(done.status).toBe("completed");
    const asked = server.completions.map((c) => c.body!.messages);
    expect(asked).toHaveLength(2);
    expect(JSON.stringify(asked[0])).not.toContain("metric");
    // After the tool's result, where the SDK's history ends: the person's words, as the user.
    expect(asked[1].at(-1)).toEqual({ role: "user", content: "Answer in metric units." });
    expect(asked[1].at(-2)).toMatchObject({ role: "tool" });
    const journal = await rt.journal(run.id, { limit: 10_000 });
    expect(journal.filter((e) => e.type === "message.delivered").map((e) => e.data.text)).toEqual(["Answer in metric units."]);
    expect(journal.filter((e) => e.type === "status").map((e) => e.data.to)).toEqual(["running", "completed"]);
    // Only the two model calls, the tool and the one delivery are calls in the journal.
    expect(journal.filter((e) => e.type === "call.completed").map((e) => [e.data.kind, e.data.name])).toEqual([
      ["model", "wire:wire-model"],
      ["tool", "lookup"],
      ["step", "messages"],
      ["model", "wire:wire-model"],
    ]);
  });
});
