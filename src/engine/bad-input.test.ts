import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { messagesInRows, messagesRowData, perRun, rowKey } from "../stores/sqlite-schema.js";
import type { SqliteStore } from "../stores/sqlite-store.js";
import { TetherError } from "./errors.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
/** The store's raw connection (the harness has the store's public type, which leaves it out). */
const rawDatabase = (harness: Harness) => (harness.store as SqliteStore).database;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

async function codeOf(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!TetherError.isInstance(error)) throw new Error(`expected a TetherError, got ${String(error)}`);
  return error.code;
}

const search = tool({ name: "search", description: "Search", input: z.object({ query: z.string() }), execute: ({ query }) => ({ hits: [query] }) });
const researcher = toolLoopAgent({
  name: "researcher",
  tools: [search],
  model: "simulated:sim-1?seed=5&tps=Infinity",
  vars: z.object({ topic: z.string() }).strict(),
  initialVars: ({ prompt }) => ({ topic: prompt }),
});

/** A run paused after its first step by a one-step budget. */
async function pausedRun() {
  h = harness([researcher]);
  const rt = h.runtime;
  const run = await rt.start("researcher", "tides", { budgets: { maxSteps: 1 } });
  const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
  expect(paused).toMatchObject({ status: "paused", step: 1 });
  await rt.settled(run.id);
  return { rt, run: paused };
}

/** The key of a run's row `n` in the journal table. */
function keyOf(runId: string, n: number): number {
  return rowKey(h!.store.runKey(runId)!, n);
}

/** The run's row of messages that holds message `index`: its key, its bodies, and where `index` is among them. */
function messagesRow(runId: string, index: number): { k: number; bodies: string[]; at: number } {
  const rows = rawDatabase(h!)
    .prepare("SELECT k, data FROM journal WHERE k > ? AND k < ? AND type <= 0 ORDER BY k")
    .all(keyOf(runId, 0), keyOf(runId, perRun - 1)) as { k: number; data: string }[];
  let first = 0;
  for (const row of rows) {
    const bodies = messagesInRows([row.data]);
    if (index < first + bodies.length) return { k: row.k, bodies, at: index - first };
    first += bodies.length;
  }
  throw new Error(`run ${runId} has no message ${index}`);
}

function messageBody(runId: string, index: number): string {
  const row = messagesRow(runId, index);
  return row.bodies[row.at];
}

/** Overwrites message `index` in the database file, as a disk or a person with a SQL shell might. */
function overwriteMessage(runId: string, index: number, body: string): void {
  const row = messagesRow(runId, index);
  row.bodies[row.at] = body;
  rawDatabase(h!).prepare("UPDATE journal SET data = ? WHERE k = ?").run(messagesRowData(row.bodies), row.k);
}

function rowCounts(runId: string): Record<string, number> {
  const db = rawDatabase(h!);
  const byRunId = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table} WHERE run_id = ?`).get(runId) as { n: number }).n;
  const byKey = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table} WHERE k >= ? AND k < ?`).get(keyOf(runId, 0), keyOf(runId, perRun - 1)) as { n: number }).n;
  const snapshots = (db.prepare("SELECT count(*) AS n FROM journal WHERE k >= ? AND k < ? AND snap_seq IS NOT NULL").get(keyOf(runId, 0), keyOf(runId, perRun - 1)) as { n: number }).n;
  const messages = (db.prepare("SELECT count(*) AS n FROM journal WHERE k >= ? AND k < ? AND type <= 0").get(keyOf(runId, 0), keyOf(runId, perRun - 1)) as { n: number }).n;
  return { entries: byKey("journal") - messages, messages, snapshots, effects: byRunId("effects"), commands: byRunId("commands") };
}

describe("unknown ids and refused transitions", () => {
  it("answers run_not_found for a run that does not exist, on every read and command", async () => {
    h = harness([researcher]);
    const rt = h.runtime;
    for (const call of [
      rt.get("run_nope"),
      rt.pause("run_nope"),
      rt.resume("run_nope"),
      rt.cancel("run_nope"),
      rt.journal("run_nope"),
      rt.state("run_nope"),
      rt.fork("run_nope", { fromStep: 0 }),
      rt.cancelPreview("run_nope"),
    ]) {
      expect(await codeOf(call)).toBe("run_not_found");
    }
  });

  it("refuses to resume or pause a cancelled run with illegal_transition", async () => {
    const { rt, run } = await pausedRun();
    await rt.cancel(run.id);
    await rt.waitFor(run.id, ["cancelled"]);
    expect(await codeOf(rt.resume(run.id))).toBe("illegal_transition");
    expect(await codeOf(rt.pause(run.id))).toBe("illegal_transition");
    expect((await rt.cancel(run.id)).status).toBe("cancelled");
    const outcomes = (await rt.commands(run.id)).map((c) => [c.type, c.outcome]);
    expect(outcomes.slice(-3)).toEqual([
      ["resume", "refused: illegal_transition"],
      ["pause", "refused: illegal_transition"],
      ["cancel", "already_holds"],
    ]);
  });

  it("refuses an unknown agent with unknown_agent and invalid input with invalid_input", async () => {
    h = harness([researcher]);
    const rt = h.runtime;
    expect(await codeOf(rt.start("nobody", "hi"))).toBe("unknown_agent");
    expect(await codeOf(rt.start("researcher", 42))).toBe("invalid_input");
    expect(await codeOf(rt.start("researcher", { prompt: "" }))).toBe("invalid_input");
    expect(await codeOf(rt.start("researcher", { prompt: "hi", extra: true }))).toBe("invalid_input");
    expect(await rt.list()).toEqual([]);
    // The messages point at the fix: where agents are registered, and the shape the agent takes.
    await expect(rt.start("nobody", "hi")).rejects.toThrow(/known: researcher\). Register it with createTether\(\{ agents: \[\.\.\.\] \}\); for the CLI, export it from tether\.config\.ts or pass --agents <file>/);
    await expect(rt.start("researcher", 42)).rejects.toThrow(/^invalid input for agent researcher: \(input\): .+\. It takes: string \| \{ prompt: string \}$/);
  });

  it("refuses a lease of no time or of more than a day with invalid_input, before the runtime starts", async () => {
    h = harness([researcher]);
    for (const leaseMs of [0, -5, Number.NaN, Infinity, 86_400_001, 99_999_999_999_999]) {
      let error: unknown;
      try {
        h.open({ leaseMs });
      } catch (e) {
        error = e;
      }
      expect(TetherError.isInstance(error, "invalid_input"), String(leaseMs)).toBe(true);
      expect((error as Error).message).toContain("leaseMs must be a number of milliseconds above 0 and at most 86400000 (a day)");
    }
    expect(h.open({ leaseMs: 86_400_000 }).leaseMs).toBe(86_400_000);
  });

  it("refuses a fork from a step the run has not reached with invalid_input", async () => {
    const { rt, run } = await pausedRun();
    expect(await codeOf(rt.fork(run.id, { fromStep: 2 }))).toBe("invalid_input");
    expect(await codeOf(rt.fork(run.id, { fromStep: -1 }))).toBe("invalid_input");
    expect(await codeOf(rt.fork(run.id, { fromStep: 0.5 }))).toBe("invalid_input");
  });
});

describe("a corrupt snapshot", () => {
  it("refuses resume with snapshot_corrupt, deletes nothing and leaves the status as it was", async () => {
    const { rt, run } = await pausedRun();
    const body = messageBody(run.id, 1);
    const flipped = body.replace(/"assistant"/, '"assistbnt"');
    expect(flipped).not.toBe(body);
    overwriteMessage(run.id, 1, flipped);
    const before = rowCounts(run.id);
    const journalBefore = (await rt.journal(run.id)).length;

    const error = await rt.resume(run.id, { budgets: { maxSteps: 50 } }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "snapshot_corrupt" });
    expect((error as Error).message).toContain("nothing was deleted");
    expect(await codeOf(rt.state(run.id))).toBe("snapshot_corrupt");

    const after = await rt.get(run.id);
    expect(after).toMatchObject({ status: "paused", statusReason: run.statusReason, step: 1, snapshotSeq: run.snapshotSeq });
    expect(rowCounts(run.id)).toEqual({ ...before, entries: before.entries + 1, commands: before.commands + 1 });
    const journal = await rt.journal(run.id);
    expect(journal.length).toBe(journalBefore + 1);
    expect(journal[journal.length - 1]).toMatchObject({ type: "control", data: { command: "resume", outcome: "refused: snapshot_corrupt" } });
    expect(messageBody(run.id, 1)).toBe(flipped);
  });

  it("refuses a snapshot whose vars were changed", async () => {
    const { rt, run } = await pausedRun();
    rawDatabase(h!)
      .prepare("UPDATE journal SET vars = ? WHERE k >= ? AND k < ? AND vars IS NOT NULL")
      .run('{"topic":"ebb tides"}', keyOf(run.id, 0), keyOf(run.id, perRun - 1));
    expect(await codeOf(rt.resume(run.id))).toBe("snapshot_corrupt");
    expect((await rt.get(run.id)).status).toBe("paused");
  });

  it("still lets a corrupt run be cancelled: compensation does not need the agent's state", async () => {
    const ledger = new Ledger();
    const agent = sequenceAgent({
      name: "publisher",
      tools: [effectTool({ name: "publish", ledger, compensable: true }), effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true })],
      steps: [
        { tool: "publish", input: { id: "a" } },
        { tool: "wait", input: { id: "b" } },
      ],
    });
    h = harness([agent], { workerPollMs: 10 });
    const rt = h.runtime;
    rt.startWorker();
    const run = await rt.start("publisher", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.pause(run.id);
    await rt.waitFor(run.id, ["paused"]);
    overwriteMessage(run.id, 0, '{"role":"tool"}');
    await rt.cancel(run.id);
    const done = await rt.waitFor(run.id, ["cancelled"], { timeoutMs: 5_000 });
    expect(done.report?.compensated).toEqual([{ callSeq: 1, tool: "publish" }]);
    expect(ledger.compensations).toHaveLength(1);
    const recoveries = (await rt.journal(run.id, { limit: 10_000 })).filter((e) => e.type === "recovery");
    expect(recoveries.length).toBeLessThanOrEqual(1);
  });
});

describe("state edits", () => {
  it("refuses an invalid patch with invalid_state_patch and changes nothing", async () => {
    const { rt, run } = await pausedRun();
    const state = await rt.state(run.id);
    for (const patch of [
      "turns=3",
      ["vars"],
      { vars: { topic: "x" }, messages: [] },
      { vars: "x" },
      { vars: { topic: 42 } },
      { vars: { unknown: true } },
      { vars: { topic: null } },
    ]) {
      expect(await codeOf(rt.resume(run.id, { patch })), JSON.stringify(patch)).toBe("invalid_state_patch");
      expect(await codeOf(rt.editPaused(run.id, { patch })), JSON.stringify(patch)).toBe("invalid_state_patch");
    }
    expect(await codeOf(rt.resume(run.id, { message: "  " }))).toBe("invalid_state_patch");
    expect(await rt.state(run.id)).toEqual(state);
    expect(await rt.get(run.id)).toMatchObject({ status: "paused", snapshotSeq: run.snapshotSeq, step: 1 });
  });

  it("applies a valid patch and a message, journaled with the actor", async () => {
    const { rt, run } = await pausedRun();
    const edited = await rt.editPaused(run.id, { patch: { vars: { topic: "neap tides" } }, message: "focus on the moon", actor: "erin" });
    expect(edited.status).toBe("paused");
    const state = await rt.state(run.id);
    // The loop's turn count is not kept in vars: the strict schema names only the user's own.
    expect(state.vars).toEqual({ topic: "neap tides" });
    expect(state.messages[state.messages.length - 1]).toEqual({ role: "user", content: "focus on the moon", author: "erin" });
    const journal = await rt.journal(run.id);
    expect(journal.filter((e) => e.type.startsWith("state.")).map((e) => [e.type, e.data.actor])).toEqual([
      ["state.patched", "erin"],
      ["state.message_added", "erin"],
    ]);
  });
});
