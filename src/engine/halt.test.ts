import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { HaltedError } from "./errors.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

function agents(ledger: Ledger) {
  const tools = [effectTool({ name: "publish", ledger, compensable: true }), effectTool({ name: "wait", ledger, durationMs: 400, abortable: true })];
  const steps = [
    { tool: "publish", input: { id: "a" } },
    { tool: "wait", input: { id: "b" } },
  ];
  return [sequenceAgent({ name: "alpha", tools, steps }), sequenceAgent({ name: "beta", tools, steps })];
}

describe("halt, the kill switch", () => {
  it("aborts every in-flight call, shows halted, runs no compensation, refuses new runs; unhalt leaves them paused", async () => {
    const ledger = new Ledger();
    h = harness(agents(ledger));
    const rt = h.runtime;
    const first = await rt.start("alpha", null);
    const second = await rt.start("beta", null);
    await waitUntil(() => ledger.executionsOf("wait") === 2);
    const result = await rt.halt({ actor: "root", reason: "incident 42" });
    expect(result.scope).toBe("*");
    expect(result.halted.sort()).toEqual([first.id, second.id].sort());

    for (const id of [first.id, second.id]) {
      await rt.settled(id);
      const run = await rt.get(id);
      expect(run).toMatchObject({ status: "halted", statusReason: "incident 42", lease: null, inflight: null, runningSince: null });
      const journal = await rt.journal(id);
      expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: 2, data: { reason: "halted" } });
      expect(journal.filter((e) => e.type.startsWith("compensation."))).toEqual([]);
      expect(journal.find((e) => e.type === "control")?.data).toMatchObject({ command: "halt", actor: "root", outcome: "applied", scope: "*" });
      expect((await rt.effects(id)).map((e) => e.state)).toEqual(["done"]);
    }
    expect(ledger.compensations).toEqual([]);
    expect(await rt.halts()).toMatchObject([{ scope: "*", actor: "root", reason: "incident 42" }]);
    await expect(rt.start("alpha", null)).rejects.toBeInstanceOf(HaltedError);
    await expect(rt.start("alpha", null)).rejects.toMatchObject({ code: "halted" });
    await expect(rt.fork(first.id, { fromStep: 1 })).rejects.toMatchObject({ code: "halted" });
    // One condition, one code: every command the halt stops answers `halted`, and says how to go on.
    await expect(rt.resume(first.id)).rejects.toMatchObject({ code: "halted", details: { currentStatus: "halted" }, message: expect.stringContaining("lift the halt (unhalt)") });
    await expect(rt.pause(first.id)).rejects.toMatchObject({ code: "halted" });

    const lifted = await rt.unhalt({ actor: "root" });
    expect(lifted.paused.sort()).toEqual([first.id, second.id].sort());
    expect(await rt.halts()).toEqual([]);
    for (const id of [first.id, second.id]) expect((await rt.get(id)).status).toBe("paused");
    await rt.resume(first.id);
    const done = await rt.waitFor(first.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("publish")).toBe(2);
  });

  it("halts one agent's runs only, and a halted run can still be cancelled, with compensation", async () => {
    const ledger = new Ledger();
    h = harness(agents(ledger));
    const rt = h.runtime;
    const alpha = await rt.start("alpha", null);
    const beta = await rt.start("beta", null);
    await waitUntil(() => ledger.executionsOf("wait") === 2);
    const result = await rt.halt({ agent: "alpha" });
    expect(result).toEqual({ scope: "agent:alpha", halted: [alpha.id], failed: [] });
    await expect(rt.start("alpha", null)).rejects.toMatchObject({ code: "halted" });
    expect((await rt.waitFor(beta.id, ["completed", "failed"])).status).toBe("completed");
    await rt.settled(alpha.id);

    await rt.cancel(alpha.id);
    const cancelled = await rt.waitFor(alpha.id, ["cancelled"]);
    expect(cancelled.report?.compensated).toEqual([{ callSeq: 1, tool: "publish" }]);
    const statuses = (await rt.journal(alpha.id)).filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}`);
    expect(statuses).toEqual(["queued>running", "running>halted", "halted>cancelling", "cancelling>cancelled"]);
  });

  it("a halt stops a cancel's compensation between two undos; lifting it returns the run to cancelling, and every effect is undone once", async () => {
    const ledger = new Ledger();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    const publish = effectTool({
      name: "publish",
      ledger,
      compensable: true,
      beforeCompensate: async () => {
        // The first undo waits here, so the halt lands while the cancel is compensating.
        if (holding) return;
        holding = true;
        await held;
      },
    });
    const wait = effectTool({ name: "wait", ledger, durationMs: 5_000, abortable: true });
    const steps = [
      { tool: "publish", input: { id: "a" } },
      { tool: "publish", input: { id: "b" } },
      { tool: "wait", input: { id: "c" } },
    ];
    h = harness([sequenceAgent({ name: "drafts", tools: [publish, wait], steps })]);
    const rt = h.runtime;
    const run = await rt.start("drafts", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.cancel(run.id, { actor: "owner" });
    await waitUntil(() => holding, { what: "the first compensation" });
    await rt.halt({ actor: "root", agent: "drafts" });
    release();
    await rt.settled(run.id);
    expect(await rt.get(run.id)).toMatchObject({ status: "halted", haltedFrom: "cancelling" });
    // The undo under way when the halt came finished, and its outcome is kept; the next one did not start.
    await waitUntil(async () => (await rt.effects(run.id)).find((e) => e.callSeq === 2)?.state === "compensated", { what: "the late undo's outcome" });
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["b"]);
    expect((await rt.effects(run.id)).find((e) => e.callSeq === 1)?.state).toBe("done");
    await expect(rt.resume(run.id)).rejects.toMatchObject({ code: "halted" });

    const lifted = await rt.unhalt({ actor: "root", agent: "drafts" });
    expect(lifted).toEqual({ scope: "agent:drafts", paused: [], cancelling: [run.id], failed: [] });
    const ended = await rt.waitFor(run.id, ["cancelled", "paused", "failed", "completed"]);
    expect(ended).toMatchObject({ status: "cancelled", haltedFrom: null });
    expect(ended.report?.compensated).toEqual([
      { callSeq: 2, tool: "publish" },
      { callSeq: 1, tool: "publish" },
    ]);
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["b", "a"]);
    const statuses = (await rt.journal(run.id)).filter((e) => e.type === "status").map((e) => `${e.data.from}>${e.data.to}`);
    expect(statuses).toEqual(["queued>running", "running>cancelling", "cancelling>halted", "halted>cancelling", "cancelling>cancelled"]);
    // The owner's cancel waited through the halt and ended applied; the halt and its lifting were applied too.
    expect((await rt.commands(run.id)).map((c) => `${c.type} ${c.actor}: ${c.outcome}`)).toEqual(["cancel owner: applied", "halt root: applied", "resume local: refused: halted", "unhalt root: applied"]);
  });

  it("does not wait for a tool that ignores its signal, but keeps its late result, so it never runs twice", async () => {
    const ledger = new Ledger();
    const slow = effectTool({ name: "slow", ledger, durationMs: 1_000 });
    const quick = effectTool({ name: "quick", ledger });
    h = harness([sequenceAgent({ name: "steps", tools: [slow, quick], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "quick", input: { id: "b" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("steps", null);
    await waitUntil(() => ledger.executionsOf("slow") === 1);
    await rt.halt();
    await rt.settled(run.id);
    expect(await rt.get(run.id)).toMatchObject({ status: "halted", lease: null, step: 0 });
    expect((await rt.journal(run.id)).some((e) => e.type === "call.completed")).toBe(false);
    await waitUntil(async () => (await rt.journal(run.id)).some((e) => e.type === "call.completed" && e.callSeq === 1), { what: "the late result" });
    expect(await rt.get(run.id)).toMatchObject({ status: "halted", step: 1, inflight: null });
    await rt.unhalt();
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(ledger.executionsOf("slow")).toBe(1);
    expect(ledger.executionsOf("quick")).toBe(1);
  });

  it("keeps a late result that ends after the halt was lifted, when no one wrote the run's state meanwhile", async () => {
    const { ledger, rt, run, finishSlow } = await unhaltedWithHungTool();
    finishSlow();
    await waitUntil(async () => (await rt.journal(run.id)).some((e) => e.type === "call.completed" && e.callSeq === 1), { what: "the late result" });
    expect(await rt.get(run.id)).toMatchObject({ status: "paused", step: 1, inflight: null });
    await rt.resume(run.id);
    expect((await rt.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(ledger.executionsOf("slow")).toBe(1);
    expect(ledger.executionsOf("quick")).toBe(1);
  });

  it("drops a late result once the run has moved on since the halt (unhalted and edited): the state stays readable and the call is recovered as any call cut short", async () => {
    const { ledger, rt, run, finishSlow } = await unhaltedWithHungTool();
    await rt.editState(run.id, { message: "use the staging account", actor: "alice" });
    const edited = await rt.get(run.id);

    finishSlow();
    await waitUntil(() => ledger.effects.size === 1, { what: "the slow call's effect" });
    // The late result's write, had it been sent, lands within a turn or two of the group commit.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await rt.get(run.id)).toMatchObject({ version: edited.version, snapshotSeq: edited.snapshotSeq, step: 0 });
    expect((await rt.journal(run.id)).some((e) => e.type === "call.completed")).toBe(false);
    expect((await rt.state(run.id)).messages.map((m) => m.content)).toEqual(["use the staging account"]);

    // Resumed, the call cut short is what its tool declared (not idempotent: uncertain), never run again unasked.
    await rt.resume(run.id, { actor: "alice" });
    const after = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(after).toMatchObject({ status: "paused", statusReason: "uncertain_effect" });
    expect(ledger.executionsOf("slow")).toBe(1);
  });
});

/**
 * A run whose `slow` call (it ignores its signal) hangs until `finishSlow`, halted while it hangs
 * and unhalted: paused, the call's result still to come.
 */
async function unhaltedWithHungTool() {
  const ledger = new Ledger();
  let finishSlow!: () => void;
  const slowMayFinish = new Promise<void>((resolve) => (finishSlow = resolve));
  const slow = effectTool({ name: "slow", ledger, beforeEffect: () => slowMayFinish });
  const quick = effectTool({ name: "quick", ledger });
  h = harness([sequenceAgent({ name: "steps", tools: [slow, quick], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "quick", input: { id: "b" } }] })]);
  const rt = h.runtime;
  const run = await rt.start("steps", null);
  await waitUntil(() => ledger.executionsOf("slow") === 1);
  await rt.halt();
  await rt.settled(run.id);
  await rt.unhalt();
  expect((await rt.get(run.id)).status).toBe("paused");
  return { ledger, rt, run, finishSlow };
}
