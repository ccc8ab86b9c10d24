import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, TestClock, type Harness } from "../testing/index.js";
import type { AgentDefinition } from "./agent.js";
import { StaleSnapshotError } from "./errors.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** A run paused after its first step (a one-step budget) on a clock the test moves. */
async function pausedRun(options: { onStale?: AgentDefinition["onStale"]; drift?: () => true | string; staleAfterMs?: number } = {}) {
  const ledger = new Ledger();
  const publish = effectTool({ name: "publish", ledger, compensable: true, revalidate: options.drift ? () => options.drift!() : undefined });
  const note = effectTool({ name: "note", ledger });
  const agent = sequenceAgent({
    name: "publisher",
    tools: [publish, note],
    steps: [
      { tool: "publish", input: { id: "draft-1" } },
      { tool: "note", input: { id: "n" } },
    ],
    staleAfterMs: options.staleAfterMs ?? 60_000,
    onStale: options.onStale,
    budgets: { maxSteps: 1 },
  });
  const clock = new TestClock();
  h = harness([agent], { clock });
  const rt = h.runtime;
  const run = await rt.start("publisher", null);
  const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
  expect(paused).toMatchObject({ status: "paused", step: 1 });
  await rt.settled(run.id);
  return { rt, run: paused, clock, ledger };
}

const more = { budgets: { maxSteps: 10 } };

describe("the stale check on resume", () => {
  it("resumes a snapshot younger than staleAfterMs", async () => {
    const { rt, run, clock } = await pausedRun();
    clock.advance(30_000);
    await rt.resume(run.id, more);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
  });

  it("refuses an old snapshot with stale_snapshot and its reasons; force resumes it", async () => {
    const { rt, run, clock, ledger } = await pausedRun();
    clock.advance(120_000);
    const error = await rt.resume(run.id, more).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleSnapshotError);
    expect(error).toMatchObject({ code: "stale_snapshot" });
    const reasons = (error as StaleSnapshotError).details?.reasons as string[];
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toContain("120 s old");
    expect(await rt.get(run.id)).toMatchObject({ status: "paused", version: run.version + 1 });
    const journal = await rt.journal(run.id);
    expect(journal[journal.length - 1]).toMatchObject({ type: "control", data: { command: "resume", outcome: "refused: stale_snapshot" } });

    await rt.resume(run.id, { ...more, force: true, actor: "fay" });
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(ledger.executionsOf("note")).toBe(1);
    expect((await rt.commands(run.id)).map((c) => [c.type, c.outcome, c.payload.force ?? false])).toEqual([
      ["resume", "refused: stale_snapshot", false],
      ["resume", "applied", true],
    ]);
  });

  it("lets the agent's onStale hook refresh the state instead of refusing", async () => {
    const seen: string[][] = [];
    const { rt, run, clock } = await pausedRun({
      onStale: (state, reasons) => {
        seen.push(reasons);
        return { messages: [...state.messages, { role: "user", content: "the world moved on; re-check" }], vars: { ...state.vars, refreshed: true } };
      },
    });
    clock.advance(120_000);
    await rt.resume(run.id, more);
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(seen).toHaveLength(1);
    expect(seen[0][0]).toContain("old");
    const state = await rt.state(run.id);
    expect(state.vars).toMatchObject({ refreshed: true, index: 2 });
    expect(state.messages[1]).toEqual({ role: "user", content: "the world moved on; re-check" });
    const patched = (await rt.journal(run.id)).find((e) => e.type === "state.patched");
    expect(patched?.data).toMatchObject({ actor: "onStale", reasons: seen[0] });
  });

  it("reports an effect whose revalidate finds drift", async () => {
    let verdict: true | string = true;
    const { rt, run } = await pausedRun({ drift: () => verdict, staleAfterMs: 3_600_000 });
    verdict = "the draft was deleted by someone else";
    const error = await rt.resume(run.id, more).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "stale_snapshot", details: { reasons: ["effect publish (call 1) drifted: the draft was deleted by someone else"] } });
    expect((await rt.get(run.id)).status).toBe("paused");
    verdict = true;
    await rt.resume(run.id, more);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
  });
});
