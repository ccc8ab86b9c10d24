import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTether, SqliteStore, type JournalEntry, type Runtime } from "../../src/index.js";
import { ChildWorker, projectRoot, sleep, waitUntil } from "../crash/child-process.js";
import { compensatingAgentName, crossProcessAgents, streamingAgentName } from "./agents.js";

/**
 * Process A (a child) executes runs from the SQLite file; process B (this test, a runtime with
 * `worker: false`) pauses, resumes and cancels them through the store. Both read the same wall
 * clock, so B's command `createdAt` and A's journal times and model-delta times compare directly.
 */
const dir = mkdtempSync(join(tmpdir(), "tether-xp-"));
const dbPath = join(dir, "tether.db");
const compensationLogPath = join(dir, "compensations.jsonl");
let store: SqliteStore;
let b: Runtime;
let a: ChildWorker;


beforeAll(async () => {
  store = new SqliteStore({ path: dbPath });
  b = createTether({ agents: crossProcessAgents(compensationLogPath), store, worker: false });
  a = await ChildWorker.spawn(join(projectRoot, "test/cross-process/child.ts"), { dbPath, compensationLogPath });
});

afterAll(async () => {
  await a?.stop();
  await b?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function deltasOf(runId: string): Promise<{ at: number; callSeq: number }[]> {
  return new Promise((resolve) => {
    const off = a.onMessage((message) => {
      if (message.type !== "deltas" || message.runId !== runId) return;
      off();
      resolve(message.deltas as { at: number; callSeq: number }[]);
    });
    a.send({ type: "deltas", runId });
  });
}

async function journalOf(runId: string): Promise<JournalEntry[]> {
  return store.readJournal(runId, { limit: 100_000 });
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];

describe("cross-process control (A executes, B controls through the SQLite file)", () => {
  it("B pauses A's run mid-stream and A aborts the stream after B's command, with nothing streamed after the abort; B resumes it and A completes it", async () => {
    const run = await b.start(streamingAgentName, "survey the field");
    const samples: { noticeMs: number; pausedMs: number; lastDeltaMs: number; appliedMs: number }[] = [];
    for (let i = 0; i < 5; i++) {
      // Pause while A streams a model call: its `started` is the newest entry and tokens are flowing.
      await waitUntil(async () => {
        const journal = await journalOf(run.id);
        const last = journal[journal.length - 1];
        return last?.type === "call.started" && last.data.kind === "model";
      }, "A streams a model call");
      await sleep(60);
      const before = await journalOf(run.id);
      const streaming = before[before.length - 1];
      expect(streaming.type).toBe("call.started");
      await b.pause(run.id, { actor: "bob", reason: `inspect ${i}` });
      const paused = await b.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
      expect(paused.statusReason).toBe(`inspect ${i}`);

      const command = (await b.commands(run.id)).filter((c) => c.type === "pause").at(-1)!;
      const journal = await journalOf(run.id);
      const aborted = journal.find((e) => e.type === "call.aborted" && e.callSeq === streaming.callSeq);
      const pausedEntry = journal.find((e) => e.type === "status" && e.data.to === "paused" && e.seq > streaming.seq);
      expect(aborted?.data.reason).toBe("pause");
      expect(pausedEntry).toBeDefined();
      const callDeltas = (await deltasOf(run.id)).filter((d) => d.callSeq === streaming.callSeq);
      expect(callDeltas.length).toBeGreaterThan(0);
      // Nothing streamed after A journaled the abort.
      expect(callDeltas.every((d) => d.at <= aborted!.at)).toBe(true);
      samples.push({
        noticeMs: aborted!.at - command.createdAt,
        pausedMs: pausedEntry!.at - command.createdAt,
        // Negative when A's last token came before B's command (A stopped before the next token was due).
        lastDeltaMs: callDeltas[callDeltas.length - 1].at - command.createdAt,
        appliedMs: command.appliedAt! - command.createdAt,
      });
      // After the pause was recorded no call started until B resumed.
      expect(journal.filter((e) => e.type === "call.started" && e.seq > streaming.seq)).toEqual([]);
      await b.resume(run.id, { actor: "bob", reason: `go on ${i}` });
    }
    const done = await b.waitFor(run.id, ["completed", "failed"], { timeoutMs: 20_000 });
    expect(done.status).toBe("completed");
    expect(done.error).toBeNull();

    // Order, not latency (the figures are printed; the benchmark holds the targets): A aborted the
    // call and wrote `paused` after B's command, never before it.
    for (const sample of samples) {
      expect(sample.noticeMs).toBeGreaterThanOrEqual(0);
      expect(sample.pausedMs).toBeGreaterThanOrEqual(sample.noticeMs);
    }
    console.info(
      `cross-process pause, B's command → A (ms), median / max of ${samples.length}: ` +
        `last delta ${median(samples.map((s) => s.lastDeltaMs))} / ${Math.max(...samples.map((s) => s.lastDeltaMs))}, ` +
        `call.aborted ${median(samples.map((s) => s.noticeMs))} / ${Math.max(...samples.map((s) => s.noticeMs))}, ` +
        `paused ${median(samples.map((s) => s.pausedMs))} / ${Math.max(...samples.map((s) => s.pausedMs))}`,
    );

    const commands = await b.commands(run.id);
    expect(commands.map((c) => c.type)).toEqual(samples.flatMap(() => ["pause", "resume"]));
    for (const command of commands) {
      expect(command.actor).toBe("bob");
      expect(command.reason).toMatch(/^(inspect|go on) \d$/);
      expect(command.appliedAt).toBeGreaterThanOrEqual(command.createdAt);
      expect(command.outcome).toBe("applied");
    }
    // Every command also shows in the journal, with its id.
    const controls = (await journalOf(run.id)).filter((e) => e.type === "control").map((e) => e.data.commandId);
    expect(controls).toEqual(commands.map((c) => c.id));
  }, 60_000);

  it("B cancels A's run and A runs the compensation, newest first", async () => {
    const run = await b.start(compensatingAgentName, "publish pages");
    await waitUntil(async () => (await store.listEffects(run.id)).length >= 3, "A has completed three compensable effects");
    await b.cancel(run.id, { actor: "carol", reason: "wrong audience" });
    const cancelled = await b.waitFor(run.id, ["cancelled"], { timeoutMs: 10_000 });

    const effects = await store.listEffects(run.id);
    const newestFirst = effects.map((e) => e.callSeq).sort((x, y) => y - x);
    expect(effects.length).toBeGreaterThanOrEqual(3);
    expect(effects.every((e) => e.state === "compensated")).toBe(true);
    expect(cancelled.report?.compensated.map((c) => c.callSeq)).toEqual(newestFirst);
    const journal = await journalOf(run.id);
    expect(journal.filter((e) => e.type === "compensation.succeeded").map((e) => e.callSeq)).toEqual(newestFirst);
    // The compensations ran in process A, not in B.
    const log = readFileSync(compensationLogPath, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { key: string; pid: number })
      .filter((entry) => entry.key.startsWith(`${run.id}:`));
    expect(log.map((entry) => entry.key)).toEqual(newestFirst.map((seq) => `${run.id}:${seq}:compensate`));
    expect(new Set(log.map((entry) => entry.pid))).toEqual(new Set([a.pid]));
    expect(a.pid).not.toBe(process.pid);

    const [command] = await b.commands(run.id);
    expect(command).toMatchObject({ type: "cancel", actor: "carol", reason: "wrong audience", outcome: "applied" });
    expect(command.appliedAt).toBeGreaterThanOrEqual(command.createdAt);
    expect(journal.find((e) => e.type === "control")?.data).toMatchObject({ command: "cancel", commandId: command.id, actor: "carol" });
  }, 30_000);
});
