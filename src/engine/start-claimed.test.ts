import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import { tempPostgres } from "../testing/temp-postgres.js";
import { SnapshotWriter } from "./snapshot.js";
import { createdSnapshot } from "./snapshot-handoff.js";
import type { Store } from "./store.js";

/**
 * A worker that starts a run with room for it creates the run claimed: one write takes the lease
 * (epoch 1) with the creation, and the run executes at once from the snapshot it was created
 * with. A worker that is full, or a process that executes nothing, creates it queued.
 */

let h: Harness | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
  for (const close of closers.splice(0).reverse()) await close();
});

function receiptAgent(ledger: Ledger, hold?: Promise<void>) {
  return sequenceAgent({
    name: "writer",
    tools: [effectTool({ name: "receipt", ledger, ...(hold ? { afterEffect: () => hold } : {}) })],
    steps: [{ tool: "receipt", input: { id: "order-1" } }],
  });
}

describe("a run started by a worker", () => {
  it("is created claimed: the start answers running at epoch 1 under this worker's lease, its journal says queued → running once, and the run completes with no claim after nor a read of its snapshot", async () => {
    const ledger = new Ledger();
    h = harness([receiptAgent(ledger)], { leaseMs: 60_000 });
    const claims: unknown[] = [];
    const update = h.store.update.bind(h.store);
    h.store.update = async (u) => (u.claim && claims.push(u), update(u));
    // The executor starts from the snapshot the creation wrote: nothing is read back.
    const loads: string[] = [];
    const loadState = h.store.loadState.bind(h.store);
    h.store.loadState = async (runId, options) => (loads.push(runId), loadState(runId, options));
    const run = await h.runtime.start("writer", null);
    expect(run).toMatchObject({ status: "running", epoch: 1, lease: { workerId: "worker-a", epoch: 1 }, runningSince: run.createdAt });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed"], { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: "completed", epoch: 1 });
    const journal = await h.store.readJournal(run.id, { limit: 1000 });
    expect(journal.slice(0, 2).map((e) => [e.seq, e.type, e.data])).toEqual([
      [1, "run.created", { agent: "writer", version: run.agentVersion, owner: "local" }],
      [2, "status", expect.objectContaining({ from: "queued", to: "running" })],
    ]);
    expect(journal.filter((e) => e.type === "status" && e.data.to === "running")).toHaveLength(1);
    expect(claims).toEqual([]);
    expect(loads).toEqual([]);
    expect(ledger.executionsOf("receipt")).toBe(1);
  });

  it("beyond its concurrency creates the rest queued: never more executing than its places, and every run completes once places free", async () => {
    const ledger = new Ledger();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h = harness([receiptAgent(ledger, held)], { leaseMs: 60_000, concurrency: 2 });
    h.runtime.startWorker();
    const runs = await Promise.all(Array.from({ length: 5 }, () => h!.runtime.start("writer", null)));
    expect(runs.map((r) => r.status).sort()).toEqual(["queued", "queued", "queued", "running", "running"]);
    for (const run of runs.filter((r) => r.status === "queued")) expect(run).toMatchObject({ epoch: 0, lease: null });
    await waitUntil(() => ledger.executionsOf("receipt") === 2, { what: "the two places' calls" });
    expect(h.runtime.executingCount).toBe(2);
    release();
    for (const run of runs) expect((await h.runtime.waitFor(run.id, ["completed", "failed"], { timeoutMs: 20_000 })).status).toBe("completed");
    expect(ledger.executionsOf("receipt")).toBe(5);
  });

  it("in a process that executes nothing (worker: false) is created queued, and a worker claims it", async () => {
    const ledger = new Ledger();
    h = harness([receiptAgent(ledger)], { leaseMs: 60_000, worker: false });
    const run = await h.runtime.start("writer", null);
    expect(run).toMatchObject({ status: "queued", epoch: 0, lease: null });
    const worker = h.open({ leaseMs: 60_000 });
    worker.startWorker();
    const done = await worker.waitFor(run.id, ["completed", "failed"], { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: "completed", epoch: 1, lease: null });
  });
});

describe("a new run's first snapshot handed to its executor", () => {
  const stores: [string, () => Promise<Store>][] = [
    [
      "sqlite",
      async () => {
        const ledger = new Ledger();
        h = harness([receiptAgent(ledger)]);
        return h.store;
      },
    ],
    [
      "postgres",
      async () => {
        const pg = tempPostgres("claimed");
        closers.push(() => pg.cleanup());
        return pg.open().open();
      },
    ],
  ];
  for (const [name, open] of stores) {
    it(`is what the ${name} store reads back for it`, async () => {
      const store = await open();
      const state = { messages: [{ role: "user" as const, content: "find the cheapest flight" }], vars: { budget: 300, seen: [] } };
      const { write } = SnapshotWriter.forNewRun(state, 1_000);
      const run = await store.createRun(
        { id: `run_${name}`, agent: "writer", agentVersion: "1", owner: "local", status: "running", input: "go", model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1_000, claim: { workerId: "worker-s", until: 61_000 } },
        write,
        [
          { type: "run.created", at: 1_000, data: {} },
          { type: "status", at: 1_000, data: { from: "queued", to: "running" } },
        ],
      );
      const { verifiedChain, ...handed } = createdSnapshot(run, write);
      const stored = await store.loadState(run.id);
      expect(handed).toEqual({ head: stored.head, varsJson: stored.varsJson, messages: stored.messages });
      expect(verifiedChain).toBe(stored.head.chain);
    });
  }
});
