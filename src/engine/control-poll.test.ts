import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, tempSqlite, waitUntil, type Harness, type TempSqlite } from "../testing/index.js";
import type { SqliteStore } from "../sqlite-store-types.js";
import { observedStore } from "../testing/observed-store.js";

let h: Harness | undefined;
let sqlite: TempSqlite | undefined;
afterEach(async () => {
  await h?.cleanup();
  await sqlite?.cleanup();
  h = undefined;
  sqlite = undefined;
});

/** The store, counting the run reads it serves. */
function counting(store: SqliteStore): { store: SqliteStore; reads: () => number } {
  let reads = 0;
  const observed = observedStore(store, (method) => {
    if (method === "getRun") reads += 1;
  });
  return { store: observed, reads: () => reads };
}

describe("an executing run polling for control written through another store connection (one process)", () => {
  it("reads the run only when the store changed, and still sees a pause written through a second connection", async () => {
    const ledger = new Ledger();
    // The call holds until the test lets it go: the pause is seen while it is in flight, whatever the machine's load.
    let release: (() => void) | undefined;
    const agent = sequenceAgent({
      name: "slow",
      tools: [effectTool({ name: "crawl", ledger, afterEffect: () => new Promise<void>((resolve) => (release = resolve)) })],
      steps: [{ tool: "crawl", input: { id: "a" } }],
    });
    sqlite = tempSqlite();
    const counted = counting(sqlite.open());
    h = harness([agent], { store: counted.store, controlPollMs: 10 });
    const run = await h.runtime.start("slow", null);
    await waitUntil(() => ledger.executionsOf("crawl") === 1, { what: "the tool to start" });

    // 300 ms of a tool call with nothing written anywhere: about 30 polls, next to no reads.
    const before = counted.reads();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(counted.reads() - before).toBeLessThanOrEqual(2);

    // A second connection in this process (SQLite cannot tell it from another process's) pauses the run.
    const other = h.open({ store: sqlite.open() });
    await other.pause(run.id, { actor: "bob", reason: "from elsewhere" });
    const noticed = await h.runtime.waitFor(run.id, (r) => r.status === "pausing" && r.waitingFor !== null);
    expect(noticed.waitingFor).toMatchObject({ kind: "tool", name: "crawl" });
    expect(ledger.executionsOf("crawl")).toBe(1);
    expect((await h.runtime.journal(run.id)).filter((e) => e.type === "call.completed")).toEqual([]);
    release!();
    const paused = await h.runtime.waitFor(run.id, ["paused"], { timeoutMs: 5_000 });
    expect(paused.step).toBe(1);
    expect(ledger.executionsOf("crawl")).toBe(1);
  });
});
