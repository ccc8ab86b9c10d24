import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { effectTool, harness, Ledger, waitUntil, type Harness } from "../testing/index.js";
import { PriceTable } from "./pricing.js";

/** Two promises the suite had not exercised: the cost budget, and halt stopping a model stream. */

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("the cost budget", () => {
  it("pauses the run once its model calls cost the budget, before the next call starts; raising it continues", async () => {
    const ledger = new Ledger();
    // A dollar per token, so the first model call spends the budget.
    const prices = new PriceTable().set("simulated:sim-1", { inputPerMTok: 1e6, outputPerMTok: 1e6 });
    h = harness([toolLoopAgent({ name: "spender", tools: [effectTool({ name: "work", ledger })], model: "simulated:sim-1?seed=3&tps=Infinity", budgets: { maxCostUsd: 5 } })], { prices });
    const rt = h.runtime;
    const run = await rt.start("spender", "spend it");
    const paused = await rt.waitFor(run.id, ["paused", "completed", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.statusReason).toMatch(/^budget_cost: \$\d+\.\d{4} of \$5 spent$/);
    expect(paused.usage.costUsd).toBeGreaterThanOrEqual(5);
    const journal = await rt.journal(run.id);
    const tripped = journal.findIndex((e) => e.type === "budget.tripped");
    expect(journal[tripped].data.reason).toBe(paused.statusReason);
    // The model call that spent it completed; no call started after the trip.
    expect(journal.filter((e) => e.type === "call.completed" && e.data.kind === "model")).toHaveLength(1);
    expect(journal.slice(tripped).filter((e) => e.type === "call.started")).toEqual([]);
    expect(ledger.executionsOf("work")).toBe(0);

    await rt.settled(run.id);
    await rt.resume(run.id, { budgets: { maxCostUsd: 1e9 } });
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("work")).toBeGreaterThan(0);
  });
});

describe("halt during a model stream", () => {
  it("aborts the stream at once, journals the abort with reason halted, and the call is issued again after unhalt and resume", async () => {
    h = harness([toolLoopAgent({ name: "talker", model: "simulated:sim-1?seed=4&tps=20" })]);
    const rt = h.runtime;
    const run = await rt.start("talker", "talk slowly");
    await waitUntil(async () => (await rt.journal(run.id)).some((e) => e.type === "call.started" && e.data.kind === "model"), { what: "the model call to start" });
    await rt.halt({ actor: "root", reason: "incident" });
    await rt.settled(run.id);
    const halted = await rt.get(run.id);
    expect(halted).toMatchObject({ status: "halted", statusReason: "incident" });
    const journal = await rt.journal(run.id);
    const started = journal.find((e) => e.type === "call.started" && e.data.kind === "model")!;
    expect(journal.find((e) => e.type === "call.aborted")).toMatchObject({ callSeq: started.callSeq, data: { kind: "model", reason: "halted" } });
    expect(journal.filter((e) => e.type === "call.completed")).toEqual([]);

    await rt.unhalt({ actor: "root" });
    expect((await rt.get(run.id)).status).toBe("paused");
    await rt.resume(run.id, { actor: "root" });
    const done = await rt.waitFor(run.id, ["completed", "failed"], { timeoutMs: 30_000 });
    expect(done.status).toBe("completed");
    const after = await rt.journal(run.id);
    expect(after.filter((e) => e.type === "call.completed" && e.data.kind === "model").length).toBeGreaterThan(0);
  });
});
