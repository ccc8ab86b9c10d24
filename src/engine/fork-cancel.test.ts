import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { ForkInheritsEffectsError } from "./errors.js";
import type { JournalEntry } from "./store.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * Three compensable `work` effects (calls 1, 2, 3 at steps 1, 2, 3), then a `publish` that waits
 * for approval: the source and every fork of it end up paused, live, with their effects done.
 */
function writer(ledger: Ledger) {
  const publish = tool({ name: "publish", description: "Publish", input: z.object({ id: z.string() }), needsApproval: true, execute: ({ id }) => ({ published: id }) });
  const steps = [
    { tool: "work", input: { id: "a" } },
    { tool: "work", input: { id: "b" } },
    { tool: "work", input: { id: "c" } },
    { tool: "publish", input: { id: "d" } },
  ];
  return sequenceAgent({ name: "writer", tools: [effectTool({ name: "work", ledger, compensable: true }), publish], steps });
}

async function pausedSourceAndFork(ledger: Ledger, fromStep = 2) {
  h = harness([writer(ledger)]);
  const rt = h.runtime;
  const source = await rt.start("writer", null);
  await rt.waitFor(source.id, ["paused"]);
  const fork = await rt.fork(source.id, { fromStep, actor: "ana" });
  await rt.waitFor(fork.id, ["paused"]);
  return { rt, source, fork };
}

function lastControl(journal: JournalEntry[]): JournalEntry | undefined {
  return journal.filter((e) => e.type === "control" && e.data.command === "cancel").at(-1);
}

describe("cancelling a run that a live fork inherited effects from", () => {
  it("is refused with fork_inherits_effects naming the forks and the effects, and the refusal is journaled; nothing is undone", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger);

    const refusal = await rt.cancel(source.id, { actor: "bo" }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ForkInheritsEffectsError);
    const error = refusal as ForkInheritsEffectsError;
    expect(error.code).toBe("fork_inherits_effects");
    expect(error.details).toEqual({
      runId: source.id,
      forks: [{ runId: fork.id, status: "paused", fromStep: 2, effects: [2, 1] }],
      effects: [
        { callSeq: 2, tool: "work", forks: [fork.id] },
        { callSeq: 1, tool: "work", forks: [fork.id] },
      ],
    });
    expect(error.message).toContain(`${fork.id} (paused, from step 2)`);
    expect(error.message).toContain("work (call 2), work (call 1)");
    expect(error.message).toContain(`tether cancel ${source.id} --inherited compensate|keep`);

    expect((await rt.get(source.id)).status).toBe("paused");
    expect(ledger.compensations).toEqual([]);
    expect(lastControl(await rt.journal(source.id))?.data).toMatchObject({
      actor: "bo",
      outcome: "refused: fork_inherits_effects",
      forks: [{ runId: fork.id, fromStep: 2, effects: [2, 1] }],
      inheritedEffects: [
        { callSeq: 2, tool: "work", forks: [fork.id] },
        { callSeq: 1, tool: "work", forks: [fork.id] },
      ],
    });
  });

  it("the cancel preview lists the forks and the effects they inherited", async () => {
    const { rt, source, fork } = await pausedSourceAndFork(new Ledger());
    const preview = await rt.cancelPreview(source.id);
    expect(preview.compensations.map((c) => c.callSeq)).toEqual([3, 2, 1]);
    expect(preview.forks).toEqual([{ runId: fork.id, status: "paused", fromStep: 2, effects: [2, 1] }]);
    expect(preview.inherited).toEqual([
      { callSeq: 2, tool: "work", forks: [fork.id] },
      { callSeq: 1, tool: "work", forks: [fork.id] },
    ]);
  });

  it("keep: only the effects no live fork inherited are compensated; the kept ones are in the report and the choice in the journal", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger);
    const forkEffectsBefore = await rt.effects(fork.id);

    await rt.cancel(source.id, { actor: "bo", reason: "wrong topic", inherited: "keep" });
    const cancelled = await rt.waitFor(source.id, ["cancelled"]);

    // The compensating tool saw only c (call 3): a and b stay for the fork.
    expect(ledger.compensations.map((c) => ({ id: c.input.id, key: c.key }))).toEqual([{ id: "c", key: `${source.id}:3:compensate` }]);
    expect(cancelled.report).toMatchObject({
      compensated: [{ callSeq: 3, tool: "work" }],
      failed: [],
      kept: [
        { callSeq: 2, tool: "work", forks: [fork.id] },
        { callSeq: 1, tool: "work", forks: [fork.id] },
      ],
    });
    expect((await rt.effects(source.id)).map((e) => [e.callSeq, e.state])).toEqual([
      [1, "kept"],
      [2, "kept"],
      [3, "compensated"],
    ]);
    const journal = await rt.journal(source.id);
    expect(lastControl(journal)?.data).toMatchObject({
      actor: "bo",
      reason: "wrong topic",
      inherited: "keep",
      forks: [{ runId: fork.id, status: "paused", fromStep: 2, effects: [2, 1] }],
      inheritedEffects: [
        { callSeq: 2, tool: "work", forks: [fork.id] },
        { callSeq: 1, tool: "work", forks: [fork.id] },
      ],
    });
    expect(journal.filter((e) => e.type === "compensation.started").map((e) => e.callSeq)).toEqual([3]);
    expect(journal.find((e) => e.type === "status" && e.data.to === "cancelled")?.data).toMatchObject({ compensated: 1, kept: 2 });
    expect((await rt.commands(source.id)).find((c) => c.type === "cancel" && c.outcome === "applied")?.payload).toMatchObject({ inherited: "keep" });

    // The fork is untouched and still relies on a and b.
    expect(await rt.get(fork.id)).toMatchObject({ status: "paused" });
    expect(await rt.effects(fork.id)).toEqual(forkEffectsBefore);
  });

  it("compensate: every effect is compensated as before, and the choice is journaled", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger);

    await rt.cancel(source.id, { actor: "bo", inherited: "compensate" });
    const cancelled = await rt.waitFor(source.id, ["cancelled"]);

    expect(ledger.compensations.map((c) => c.key)).toEqual([`${source.id}:3:compensate`, `${source.id}:2:compensate`, `${source.id}:1:compensate`]);
    expect(cancelled.report?.compensated.map((c) => c.callSeq)).toEqual([3, 2, 1]);
    expect(cancelled.report?.kept).toBeUndefined();
    expect(lastControl(await rt.journal(source.id))?.data).toMatchObject({
      actor: "bo",
      inherited: "compensate",
      forks: [{ runId: fork.id, fromStep: 2 }],
      inheritedEffects: [{ callSeq: 2 }, { callSeq: 1 }],
    });
  });

  it("a fork that inherited no effect (from step 0), or one that has ended, asks for nothing: the cancel compensates everything as before", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger, 0);
    const preview = await rt.cancelPreview(source.id);
    expect(preview.forks).toEqual([]);
    expect(preview.inherited).toEqual([]);

    // A second fork that inherited a and b, cancelled first (its own effect compensated): no longer live.
    const ended = await rt.fork(source.id, { fromStep: 2 });
    await rt.waitFor(ended.id, ["paused"]);
    await rt.cancel(ended.id);
    await rt.waitFor(ended.id, ["cancelled"]);
    ledger.compensations.length = 0;

    await rt.cancel(source.id, { actor: "bo" });
    const cancelled = await rt.waitFor(source.id, ["cancelled"]);
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["c", "b", "a"]);
    expect(cancelled.report?.compensated.map((c) => c.callSeq)).toEqual([3, 2, 1]);
    const control = lastControl(await rt.journal(source.id))!;
    expect(control.data).not.toHaveProperty("inherited");
    expect(control.data).not.toHaveProperty("forks");
    expect(await rt.get(fork.id)).toMatchObject({ status: "paused" });
  });

  it("a fork is refused while its source is being cancelled, and once cancelled from a step that had an effect its cancel undid", async () => {
    const ledger = new Ledger();
    let releaseUndo!: () => void;
    const undoMayGo = new Promise<void>((resolve) => (releaseUndo = resolve));
    const publish = tool({ name: "publish", description: "Publish", input: z.object({ id: z.string() }), needsApproval: true, execute: ({ id }) => ({ published: id }) });
    const work = effectTool({ name: "work", ledger, compensable: true, beforeCompensate: () => undoMayGo });
    const steps = ["a", "b", "c"].map((id) => ({ tool: "work", input: { id } }));
    h = harness([sequenceAgent({ name: "writer", tools: [work, publish], steps: [...steps, { tool: "publish", input: { id: "d" } }] })]);
    const rt = h.runtime;
    const source = await rt.start("writer", null);
    await rt.waitFor(source.id, ["paused"]);
    // No live fork yet: the cancel asks for no choice. Its first undo is slow.
    await rt.cancel(source.id, { actor: "bo" });
    await waitUntil(async () => (await rt.get(source.id)).waitingFor?.kind === "compensation", { what: "the first undo to start" });

    await expect(rt.fork(source.id, { fromStep: 2, actor: "ana" })).rejects.toMatchObject({ code: "illegal_transition", message: expect.stringContaining("it is cancelling; its effects are being undone") });
    releaseUndo();
    const cancelled = await rt.waitFor(source.id, ["cancelled"]);
    expect(cancelled.report?.compensated.map((c) => c.callSeq)).toEqual([3, 2, 1]);
    await expect(rt.fork(source.id, { fromStep: 2 })).rejects.toMatchObject({ code: "illegal_transition", details: { currentStatus: "cancelled" }, message: expect.stringContaining("(work #1, work #2)") });
    await expect(rt.fork(source.id, { fromStep: 1 })).rejects.toMatchObject({ code: "illegal_transition", message: expect.stringContaining("(work #1)") });
    // From step 0 it inherits nothing.
    expect((await rt.fork(source.id, { fromStep: 0, actor: "ana" })).forkedFrom).toEqual({ runId: source.id, step: 0 });
  });

  it("a live fork of a fork counts, even when the fork between them has ended", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger);
    // fork ran c itself (its call 1, its step 3); a fork of it at step 3 holds a and b of the source, and c of the fork.
    const grandchild = await rt.fork(fork.id, { fromStep: 3 });
    await rt.waitFor(grandchild.id, ["paused"]);

    await expect(rt.cancel(fork.id)).rejects.toMatchObject({
      code: "fork_inherits_effects",
      details: { forks: [{ runId: grandchild.id, fromStep: 3, effects: [1] }], effects: [{ callSeq: 1, tool: "work", forks: [grandchild.id] }] },
    });
    await rt.cancel(fork.id, { inherited: "keep" });
    await rt.waitFor(fork.id, ["cancelled"]);

    await expect(rt.cancel(source.id)).rejects.toMatchObject({
      code: "fork_inherits_effects",
      details: { forks: [{ runId: grandchild.id, status: "paused", fromStep: 2, effects: [2, 1] }] },
    });
  });

  it("a live run of the agent whose record is damaged may be a fork that inherited the effects: the cancel is refused with store_corrupt naming it, and nothing is undone", async () => {
    const ledger = new Ledger();
    const { rt, source, fork } = await pausedSourceAndFork(ledger);
    const raw = new Database(h!.store.path);
    raw.prepare("UPDATE runs SET created_at = created_at + 1 WHERE id = ?").run(fork.id);
    raw.close();
    const refusal = rt.cancel(source.id, { actor: "bo" });
    await expect(refusal).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: source.id, damaged: [fork.id] }) });
    await expect(refusal).rejects.toThrow(`cannot tell which of run ${source.id}'s effects its live forks inherited: a live run of agent writer cannot be read (${fork.id}:`);
    expect((await rt.get(source.id)).status).toBe("paused");
    expect(ledger.compensations).toEqual([]);
  });

  it("refuses an unknown choice with invalid_input", async () => {
    const { rt, source } = await pausedSourceAndFork(new Ledger());
    await expect(rt.cancel(source.id, { inherited: "maybe" as "keep" })).rejects.toMatchObject({ code: "invalid_input" });
    expect((await rt.get(source.id)).status).toBe("paused");
  });
});
