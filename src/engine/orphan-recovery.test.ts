import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, waitUntil, type Harness } from "../testing/index.js";
import type { LeaseHolder, ProcessProbe } from "./lease-holder.js";
import type { DamagedRun, JournalEntry } from "./store.js";

/**
 * Taking back the runs of a lease holder that is gone, in one process: the first runtime is
 * closed in the middle of a call (it writes nothing more, as if killed) and a probe stands in for
 * the process table. The real process table and SIGKILL are in test/takeover.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const never = new Promise<void>(() => undefined);
const leaseMs = 60_000;

/** A probe for holder `self`: a holder is gone once its nonce is in `dead`; every question is recorded. */
function fakeProbe(nonce: string, dead: Set<string>): ProcessProbe & { asked: LeaseHolder[] } {
  const asked: LeaseHolder[] = [];
  return { self: { host: "test-host", pid: 1, nonce }, asked, gone: (holder) => (asked.push(holder), dead.has(holder.nonce)) };
}

/** The first runtime stops inside its first charge: closed as if killed, or with `releaseLeases` as a worker stopped on purpose. */
async function crashInsideCharge(idempotent: boolean, dead: Set<string>, close: { releaseLeases?: boolean } = {}) {
  const ledger = new Ledger();
  const agent = sequenceAgent({
    name: "payer",
    tools: [effectTool({ name: "charge", ledger, idempotent, afterEffect: (_key, execution) => (execution === 1 ? never : undefined) }), effectTool({ name: "receipt", ledger })],
    steps: [
      { tool: "charge", input: { id: "order-1" } },
      { tool: "receipt", input: { id: "order-1" } },
    ],
  });
  h = harness([agent], { leaseMs, processProbe: fakeProbe("first", dead) });
  const run = await h.runtime.start("payer", null);
  await waitUntil(() => ledger.executionsOf("charge") === 1);
  await h.runtime.close(close);
  const held = await h.runtime.get(run.id);
  return { ledger, held };
}

const journalOf = (id: string): Promise<JournalEntry[]> => h!.store.readJournal(id, { limit: 1000 });

describe("orphaned runs of a lease holder that is gone", () => {
  it("leases name their holder; a runtime with recoverOrphans takes a gone holder's run at once, though its lease has most of a minute to go, and moves the epoch", async () => {
    const dead = new Set<string>();
    const { ledger, held } = await crashInsideCharge(true, dead);
    expect(held.lease).toMatchObject({ workerId: "worker-a", holder: { host: "test-host", pid: 1, nonce: "first" } });
    expect(held.lease!.until - Date.now()).toBeGreaterThan(leaseMs / 2);
    dead.add("first");
    const second = h!.open({ leaseMs, processProbe: fakeProbe("second", dead), recoverOrphans: true });
    const done = await second.waitFor(held.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(done.status).toBe("completed");
    expect(done.epoch).toBe(held.epoch + 1);
    expect(ledger.keysOf("charge")).toEqual([`${held.id}:1`, `${held.id}:1`]);
    const journal = await journalOf(held.id);
    expect(journal.find((e) => e.type === "recovery" && e.data.previousWorker !== undefined)?.data).toMatchObject({ previousWorker: "worker-a", worker: "worker-b", holderGone: true });
  });

  it("a worker stopped on purpose (close with releaseLeases) lets its runs go at once: another worker takes them over though the holder lives and its lease had most of a minute to go", async () => {
    const alive = new Set<string>();
    const stoppedAt = Date.now();
    const { ledger, held: released } = await crashInsideCharge(true, alive, { releaseLeases: true });
    expect(released.status).toBe("running");
    expect(released.lease).toMatchObject({ workerId: "worker-a", holder: { nonce: "first" } });
    expect(released.lease!.until).toBeGreaterThanOrEqual(stoppedAt);
    expect(released.lease!.until).toBeLessThanOrEqual(Date.now());
    const second = h!.open({ leaseMs, processProbe: fakeProbe("second", alive), workerPollMs: 10 });
    second.startWorker();
    const done = await second.waitFor(released.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(done.status).toBe("completed");
    expect(done.epoch).toBe(released.epoch + 1);
    // The idempotent charge in flight was retried with its key; nothing ran twice without it.
    expect(ledger.keysOf("charge")).toEqual([`${released.id}:1`, `${released.id}:1`]);
    const journal = await journalOf(released.id);
    expect(journal.find((e) => e.type === "recovery" && e.data.previousWorker !== undefined)?.data).toMatchObject({ previousWorker: "worker-a", worker: "worker-b" });
  });

  it("a gone holder's run whose row is damaged does not stop the others' recovery: they are taken at once and finish; it is passed over, left as it is, and named by a listing", async () => {
    const dead = new Set<string>();
    const ledger = new Ledger();
    // Every charge of the first process hangs there, as if it were killed inside it.
    let hang = true;
    const agent = sequenceAgent({
      name: "payer",
      tools: [effectTool({ name: "charge", ledger, idempotent: true, afterEffect: () => (hang ? never : undefined) }), effectTool({ name: "receipt", ledger })],
      steps: [
        { tool: "charge", input: { id: "order-1" } },
        { tool: "receipt", input: { id: "order-1" } },
      ],
    });
    h = harness([agent], { leaseMs, processProbe: fakeProbe("first", dead) });
    const runs = [(await h.runtime.start("payer", null)).id, (await h.runtime.start("payer", null)).id, (await h.runtime.start("payer", null)).id];
    await waitUntil(() => ledger.executionsOf("charge") === 3);
    await h.runtime.close();
    // The newest run's row changed behind Tether's back (a checksummed column): its record can no longer be trusted.
    const [damagedId, ...others] = runs.slice().reverse();
    const raw = new Database(h.store.path);
    raw.prepare("UPDATE runs SET created_at = created_at + 1 WHERE id = ?").run(damagedId);
    raw.close();
    hang = false;
    dead.add("first");
    const second = h.open({ leaseMs, processProbe: fakeProbe("second", dead), recoverOrphans: true });
    for (const id of others) expect((await second.waitFor(id, ["completed", "failed", "paused"], { timeoutMs: 20_000 })).status).toBe("completed");
    await expect(second.get(damagedId)).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: damagedId }) });
    const damaged: DamagedRun[] = [];
    expect((await second.list({}, damaged)).map((run) => run.id).sort()).toEqual(others.slice().sort());
    expect(damaged).toEqual([{ id: damagedId, agent: "payer", status: "running", code: "store_corrupt", message: expect.stringContaining(`run ${damagedId}: its run row fails its checksum`) }]);
    expect((await journalOf(damagedId)).some((e) => e.type === "recovery")).toBe(false);
  });

  it("a holder that is alive keeps its run; once it is gone, startWorker takes the run and the non-idempotent call in flight becomes uncertain", async () => {
    const dead = new Set<string>();
    const { ledger, held } = await crashInsideCharge(false, dead);
    const probe = fakeProbe("second", dead);
    const second = h!.open({ leaseMs, processProbe: probe, recoverOrphans: true });
    // The second runtime's first look asked about the holder and was told it lives: the run stays its.
    await waitUntil(() => probe.asked.some((holder) => holder.nonce === "first"));
    expect(await second.get(held.id)).toMatchObject({ status: "running", epoch: held.epoch, lease: { workerId: "worker-a" } });
    dead.add("first");
    second.startWorker();
    const done = await second.waitFor(held.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(done.status).toBe("paused");
    expect(ledger.executionsOf("charge")).toBe(1);
    const journal = await journalOf(held.id);
    expect(journal.filter((e) => e.type === "call.uncertain").map((e) => e.callSeq)).toEqual([1]);
    expect(journal.some((e) => e.type === "recovery" && e.data.holderGone === true)).toBe(true);
  });

  it("without recoverOrphans or startWorker a runtime takes nothing", async () => {
    const dead = new Set<string>(["first"]);
    const { held } = await crashInsideCharge(true, dead);
    const probe = fakeProbe("second", dead);
    const second = h!.open({ leaseMs, processProbe: probe });
    // A run it starts itself executes; the orphan is left as it was.
    await second.start("payer", null);
    expect(await second.get(held.id)).toMatchObject({ status: "running", epoch: held.epoch, lease: { workerId: "worker-a" } });
    expect(probe.asked).toEqual([]);
  });
});

describe("this process's own claims", () => {
  /**
   * The claim commits; before the claimer goes on, a look for orphans reads the run (this
   * process's live lease on it), which is what startWorker's first look does on a busy loop. A
   * run a worker with room starts is created claimed (`createRun` with a lease); one started
   * while the worker is full is created queued and claimed by an `update` once a place frees.
   */
  function lookWhileClaimWritten(harnessed: Harness): { looked(): boolean } {
    const store = harnessed.store;
    let looked = false;
    const look = async () => {
      looked = true;
      harnessed.runtime.startWorker();
      await new Promise((resolve) => setTimeout(resolve, 100));
    };
    const create = store.createRun.bind(store);
    store.createRun = async (run, initial, journal) => {
      const created = await create(run, initial, journal);
      if (run.claim && !looked) await look();
      return created;
    };
    const write = store.update.bind(store);
    store.update = async (update) => {
      const result = await write(update);
      if (update.claim && !looked) await look();
      return result;
    };
    return { looked: () => looked };
  }

  it("a look for orphans while this process's creation of a run it claims is being written leaves the run to that claim: one claim, no recovery entry", async () => {
    const ledger = new Ledger();
    const agent = sequenceAgent({ name: "writer", tools: [effectTool({ name: "receipt", ledger })], steps: [{ tool: "receipt", input: { id: "order-1" } }] });
    h = harness([agent], { leaseMs, processProbe: fakeProbe("first", new Set()) });
    const probe = lookWhileClaimWritten(h);
    const run = await h.runtime.start("writer", null);
    expect(run).toMatchObject({ status: "running", epoch: 1, lease: { workerId: "worker-a" } });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(probe.looked()).toBe(true);
    expect(done.status).toBe("completed");
    expect(done.epoch).toBe(1);
    expect((await journalOf(run.id)).filter((e) => e.type === "recovery")).toEqual([]);
    expect(ledger.executionsOf("receipt")).toBe(1);
  });

  it("a look for orphans while this process's claim of a queued run (a fork) is being written leaves the run to that claim: one claim, no recovery entry", async () => {
    const ledger = new Ledger();
    const agent = sequenceAgent({ name: "writer", tools: [effectTool({ name: "receipt", ledger })], steps: [{ tool: "receipt", input: { id: "order-1" } }] });
    h = harness([agent], { leaseMs, processProbe: fakeProbe("first", new Set()) });
    const source = await h.runtime.start("writer", null);
    expect((await h.runtime.waitFor(source.id, ["completed"], { timeoutMs: 20_000 })).status).toBe("completed");
    const probe = lookWhileClaimWritten(h);
    // A fork is created queued, and claimed by an update of its own.
    const run = await h.runtime.fork(source.id, { fromStep: 0 });
    expect(run).toMatchObject({ status: "queued", epoch: 0, lease: null });
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
    expect(probe.looked()).toBe(true);
    expect(done.status).toBe("completed");
    expect(done.epoch).toBe(1);
    expect((await journalOf(run.id)).filter((e) => e.type === "recovery")).toEqual([]);
    // One receipt for each run.
    expect(ledger.executionsOf("receipt")).toBe(2);
  });
});
