import { afterEach, describe, expect, it } from "vitest";
import { createTether, type Runtime, type Store } from "../../src/index.js";
import { effectTool, Ledger, sequenceAgent, tempSqlite, waitUntil } from "../../src/testing/index.js";
import { tempPostgres } from "../../src/testing/temp-postgres.js";

/**
 * Retention on both stores: a prune removes the finished runs older than its bound, with their
 * journals, effects and commands, while other runs keep executing and keep everything.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const stores: [string, () => Promise<Store>][] = [
  [
    "sqlite",
    async () => {
      const db = tempSqlite();
      cleanups.push(() => db.cleanup());
      return db.open();
    },
  ],
  [
    "postgres",
    async () => {
      const db = tempPostgres("prune");
      cleanups.push(() => db.cleanup());
      return db.open().open();
    },
  ],
];

function gapFree(seqs: number[]): boolean {
  return seqs.every((seq, i) => seq === i + 1);
}

describe.each(stores)("prune on %s", (_name, open) => {
  it("removes only the finished runs older than its bound while other runs keep executing", async () => {
    const ledger = new Ledger();
    const quick = sequenceAgent({ name: "quick", tools: [effectTool({ name: "note", ledger })], steps: [{ tool: "note", input: { id: "a" } }] });
    const slow = sequenceAgent({
      name: "slow",
      tools: [effectTool({ name: "crawl", ledger, durationMs: 60 })],
      steps: Array.from({ length: 8 }, (_, i) => ({ tool: "crawl", input: { id: `c${i}` } })),
    });
    const store = await open();
    const tether: Runtime = createTether({ agents: [quick, slow], store, secrets: false });
    cleanups.push(() => tether.close());
    tether.startWorker();

    const finished = await Promise.all(Array.from({ length: 5 }, () => tether.start("quick", null)));
    for (const run of finished) await tether.waitFor(run.id, ["completed"], { timeoutMs: 10_000 });
    const another = await tether.start("quick", null);
    await tether.waitFor(another.id, ["completed"], { timeoutMs: 10_000 });
    const paused = await tether.start("slow", null);
    await waitUntil(async () => (await tether.get(paused.id)).step >= 1, { what: "the paused run's first step" });
    await tether.pause(paused.id, { wait: true });
    const bound = tether.clock.now() + 1;
    const sizes = await Promise.all([...finished, another].map((run) => tether.storage(run.id)));
    expect(sizes.every((s) => s.journalEntries > 0 && s.bytes > 0)).toBe(true);

    // Runs that are executing while the prune goes, in batches of one.
    const working = await Promise.all(Array.from({ length: 3 }, () => tether.start("slow", null)));
    await waitUntil(async () => (await Promise.all(working.map((r) => tether.get(r.id)))).every((r) => r.status === "running" && r.step >= 1), { what: "the slow runs to be working" });
    const dry = await tether.prune({ before: bound, dryRun: true });
    expect(dry.runs).toBe(6);
    const report = await tether.prune({ before: bound, batchSize: 1 });
    expect(report.runs).toBe(6);
    expect(report.batches).toBe(6);
    expect(report.journalEntries).toBe(sizes.reduce((n, s) => n + s.journalEntries, 0));
    expect(report.bytes).toBeGreaterThan(0);
    for (const run of [...finished, another]) {
      expect(await store.getRun(run.id)).toBeUndefined();
      expect(await store.readJournal(run.id)).toEqual([]);
      await expect(tether.storage(run.id)).rejects.toMatchObject({ code: "run_not_found" });
    }

    // What was not finished, or not old enough, is whole and goes on.
    for (const run of working) {
      const done = await tether.waitFor(run.id, ["completed"], { timeoutMs: 20_000 });
      expect(done.step).toBe(8);
      expect(gapFree((await tether.journal(run.id, { limit: 10_000 })).map((e) => e.seq))).toBe(true);
    }
    expect((await tether.get(paused.id)).status).toBe("paused");
    await tether.resume(paused.id);
    expect((await tether.waitFor(paused.id, ["completed"], { timeoutMs: 20_000 })).step).toBe(8);
    const laterBound = tether.clock.now() + 1;
    expect((await tether.prune({ before: laterBound })).runs).toBe(4);
    expect(await tether.list()).toEqual([]);
    // A run started after everything was pruned has its own key: nothing of a pruned run shows through.
    const fresh = await tether.start("quick", null);
    await tether.waitFor(fresh.id, ["completed"], { timeoutMs: 10_000 });
    expect((await tether.list()).map((r) => r.id)).toEqual([fresh.id]);
    expect(gapFree((await tether.journal(fresh.id)).map((e) => e.seq))).toBe(true);
  }, 60_000);
});
