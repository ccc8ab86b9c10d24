import { afterEach, describe, expect, it } from "vitest";
import { effectTool, harness, Ledger, sequenceAgent, tempSqlite, waitUntil, type Harness, type TempSqlite } from "../testing/index.js";
import { TetherError } from "./errors.js";
import type { RunUpdate } from "./store.js";
import type { SqliteStore } from "../sqlite-store-types.js";

/**
 * A write the store refuses once (a connection reset, a deadlock, a database busy past its
 * timeout) says nothing about the run: the worker lets the run go as it is stored and takes it
 * again, recovering the call whose outcome it could not write as that call's tool declared. It
 * never ends the run `failed` with an effect that happened left unrecorded.
 */

let h: Harness | undefined;
let sqlite: TempSqlite | undefined;
afterEach(async () => {
  await h?.cleanup();
  await sqlite?.cleanup();
  h = undefined;
  sqlite = undefined;
});

/** A store whose writes of a completed call fail with `store_error`, the first `times` of them. */
function failingCompletions(store: SqliteStore, times: number): { store: SqliteStore; failed: () => number } {
  let failed = 0;
  const proxy = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const update = args[0] as RunUpdate;
        if (property === "update" && failed < times && update.journal?.some((e) => e.type === "call.completed")) {
          failed += 1;
          return Promise.reject(new TetherError("store_error", "PostgreSQL store: Connection terminated unexpectedly"));
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, failed: () => failed };
}

const steps = [
  { tool: "publish", input: { id: "a" } },
  { tool: "note", input: { id: "b" } },
];

describe("a write the store refuses once", () => {
  it("lets the run go and takes it again: a checkable effect is found done, recorded once, and the run completes", async () => {
    const ledger = new Ledger();
    const tools = [effectTool({ name: "publish", ledger, compensable: true, checkable: true }), effectTool({ name: "note", ledger })];
    sqlite = tempSqlite();
    const failing = failingCompletions(sqlite.open(), 1);
    h = harness([sequenceAgent({ name: "publisher", tools, steps })], { store: failing.store, workerPollMs: 20 });
    h.runtime.startWorker();
    const run = await h.runtime.start("publisher", null);

    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(failing.failed()).toBe(1);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("publish")).toBe(1);
    expect((await h.runtime.effects(run.id)).map((e) => [e.tool, e.state])).toEqual([["publish", "done"]]);
    const journal = await h.runtime.journal(run.id, { limit: 1000 });
    expect(journal.find((e) => e.type === "recovery" && String(e.data.problem).includes("Connection terminated"))).toBeDefined();
    expect(journal.filter((e) => e.type === "status").map((e) => e.data.to)).not.toContain("failed");
  });

  it("takes the run again in a process that runs no worker (a library's createTether)", async () => {
    const ledger = new Ledger();
    const tools = [effectTool({ name: "publish", ledger, compensable: true, checkable: true }), effectTool({ name: "note", ledger })];
    sqlite = tempSqlite();
    const failing = failingCompletions(sqlite.open(), 1);
    h = harness([sequenceAgent({ name: "publisher", tools, steps })], { store: failing.store });
    const run = await h.runtime.start("publisher", null);

    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(failing.failed()).toBe(1);
    expect(done.status).toBe("completed");
    expect(ledger.executionsOf("publish")).toBe(1);
  });

  it("flags an effect nobody can vouch for as uncertain, and a cancel can still be asked for", async () => {
    const ledger = new Ledger();
    const tools = [effectTool({ name: "publish", ledger, compensable: true }), effectTool({ name: "note", ledger })];
    sqlite = tempSqlite();
    const failing = failingCompletions(sqlite.open(), 1);
    h = harness([sequenceAgent({ name: "publisher", tools, steps })], { store: failing.store, workerPollMs: 20 });
    h.runtime.startWorker();
    const run = await h.runtime.start("publisher", null);

    const stopped = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(stopped).toMatchObject({ status: "paused", statusReason: "uncertain_effect", inflight: { name: "publish", uncertain: true } });
    expect(ledger.executionsOf("publish")).toBe(1);
    await h.runtime.settled(run.id);
    expect((await h.runtime.cancel(run.id, { actor: "alice" })).status).toBe("cancelling");
  });

  it("fails the run when the store refuses the same write every time", async () => {
    const ledger = new Ledger();
    const tools = [effectTool({ name: "publish", ledger, compensable: true, idempotent: true }), effectTool({ name: "note", ledger })];
    sqlite = tempSqlite();
    const failing = failingCompletions(sqlite.open(), Infinity);
    h = harness([sequenceAgent({ name: "publisher", tools, steps })], { store: failing.store, workerPollMs: 20 });
    h.runtime.startWorker();
    const run = await h.runtime.start("publisher", null);

    const ended = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(ended).toMatchObject({ status: "failed", error: { code: "store_error" } });
    // Let go three times and taken again (the idempotent call issued again with its key), then failed.
    expect(failing.failed()).toBe(4);
    await waitUntil(() => !h!.runtime.isExecuting(run.id), { what: "the worker to stop" });
  });
});
