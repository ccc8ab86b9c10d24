import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("pause that waits, and resume while pausing", () => {
  it("pause({ wait: true }) resolves once the run is paused, after the call that could not be interrupted; a resume meanwhile says how to wait", async () => {
    const ledger = new Ledger();
    let release: (() => void) | undefined;
    const slow = effectTool({ name: "slow", ledger, afterEffect: () => new Promise<void>((resolve) => (release = resolve)) });
    h = harness([sequenceAgent({ name: "waiter", tools: [slow], steps: [{ tool: "slow", input: { id: "a" } }, { tool: "slow", input: { id: "b" } }] })]);
    const rt = h.runtime;
    const run = await rt.start("waiter", null);
    await waitUntil(() => release !== undefined, { what: "the tool to run" });
    const pausing = rt.pause(run.id, { actor: "alice", wait: true });
    await waitUntil(async () => (await rt.get(run.id)).status === "pausing", { what: "pausing" });
    await expect(rt.resume(run.id)).rejects.toMatchObject({ code: "illegal_transition", message: expect.stringMatching(/it is pausing; .*wait until it is paused \(pause\(id, \{ wait: true \}\)/) });
    release!();
    const paused = await pausing;
    expect(paused.status).toBe("paused");
    const journal = await rt.journal(run.id);
    const completed = journal.findIndex((e) => e.type === "call.completed");
    expect(completed).toBeGreaterThan(0);
    expect(completed).toBeLessThan(journal.findIndex((e) => e.type === "status" && e.data.to === "paused"));
    // Now the README's pause-then-resume works as written.
    release = undefined;
    await rt.resume(run.id, { actor: "alice" });
    await waitUntil(() => release !== undefined, { what: "the second call" });
    release!();
    expect((await rt.waitFor(run.id, ["completed", "failed"])).status).toBe("completed");
    expect(ledger.executionsOf("slow")).toBe(2);
  });
});
