import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, type Harness } from "../testing/index.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("cancel preview of a run that has ended", () => {
  it("offers nothing to undo and says a cancel would not apply; the cancel is refused", async () => {
    const ledger = new Ledger();
    h = harness([sequenceAgent({ name: "publisher", tools: [effectTool({ name: "publish", ledger, compensable: true })], steps: [{ tool: "publish", input: { id: "a" } }] })]);
    const run = await h.runtime.start("publisher", null);
    await h.runtime.waitFor(run.id, ["completed"]);
    expect(await h.runtime.cancelPreview(run.id)).toEqual({ runId: run.id, status: "completed", cancellable: false, compensations: [], resources: [], uncertain: [], forks: [], inherited: [] });
    await expect(h.runtime.cancel(run.id)).rejects.toMatchObject({ code: "illegal_transition" });
    expect(ledger.compensations).toEqual([]);
  });
});
