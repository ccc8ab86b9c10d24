import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTether, type JournalEntry, type Runtime, type RunRecord } from "../../src/index.js";
import type { PostgresStore } from "../../src/stores/pg-store.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import { crashAgent, crashAgentName, crashPrompt, planFor } from "../crash/agents.js";
import { ChildWorker, projectRoot, sleep, waitUntil } from "../crash/child-process.js";
import { Ledger } from "../crash/ledger.js";
import type { PgWorkerOptions } from "./pg-worker.js";

/**
 * Several worker processes on one PostgreSQL database: each run is executed by one worker at a
 * time, a dead or frozen worker's runs move to the others, and control written by any process
 * reaches the worker executing the run. Everything is read back from the journals and from a
 * ledger the tools write to (the outside world).
 */

const workerScript = join(projectRoot, "test/cluster/pg-worker.ts");
const terminal = ["completed", "failed", "cancelled"];

let db: TempPostgres;
let dir: string;
let ledger: Ledger;
let store: PostgresStore;
let control: Runtime;
let workers: ChildWorker[] = [];

beforeEach(async () => {
  db = tempPostgres("cluster");
  dir = mkdtempSync(join(tmpdir(), "tether-cluster-"));
  ledger = new Ledger(join(dir, "ledger.db"));
  store = await db.open().open();
  // The test's own process: starts and controls runs, executes none.
  control = createTether({ agents: [crashAgent(ledger, { tokensPerSecond: 400, compensateMs: 20 })], store, worker: false });
});

afterEach(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  workers = [];
  await control.close();
  await db.cleanup();
  ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

async function startWorkers(n: number, overrides: Partial<PgWorkerOptions> = {}): Promise<ChildWorker[]> {
  const options: PgWorkerOptions = { url: db.url, schema: db.schema, ledgerPath: join(dir, "ledger.db"), leaseMs: 1_000, concurrency: 20, tokensPerSecond: 400, compensateMs: 20, ...overrides };
  const started = await Promise.all(Array.from({ length: n }, () => ChildWorker.spawn(workerScript, options)));
  workers.push(...started);
  return started;
}

async function startRuns(n: number, steps: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await control.start(crashAgentName, crashPrompt("campaign", 100 + i, steps))).id);
  return ids;
}

async function runsOf(ids: string[]): Promise<RunRecord[]> {
  return Promise.all(ids.map((id) => control.get(id)));
}

/** A person resolves each uncertain call from the ledger: done with what it recorded, or retry. */
async function resolveUncertain(ids: string[]): Promise<number> {
  let resolved = 0;
  for (const run of await runsOf(ids)) {
    if (run.status !== "paused" || !run.inflight?.uncertain) continue;
    const applied = ledger.findAppend(`${run.id}:${run.inflight.callSeq}`);
    await control.resume(run.id, { actor: "cluster-test", resolve: applied === undefined ? { action: "retry" } : { action: "done", result: applied } });
    resolved += 1;
  }
  return resolved;
}

async function allJournals(ids: string[]): Promise<Map<string, JournalEntry[]>> {
  const journals = new Map<string, JournalEntry[]>();
  for (const id of ids) journals.set(id, await store.readJournal(id, { limit: 100_000 }));
  return journals;
}

/** What must hold of every run whatever happened to the workers. */
function violations(runs: RunRecord[], journals: Map<string, JournalEntry[]>, steps: number, zombie?: { pid: number; inFlight: Set<string> }): string[] {
  const v: string[] = [];
  for (const run of runs) {
    const journal = journals.get(run.id)!;
    if (run.status !== "completed") v.push(`${run.id} ended ${run.status} (${run.statusReason})`);
    journal.forEach((entry, i) => {
      if (entry.seq !== i + 1) v.push(`${run.id}: journal entry ${i + 1} has seq ${entry.seq}`);
    });
    if (run.journalSeq !== journal.length) v.push(`${run.id}: journalSeq ${run.journalSeq} but ${journal.length} entries`);
    const completions = journal.filter((e) => e.type === "status" && e.data.to === "completed").length;
    if (completions !== 1) v.push(`${run.id}: completed ${completions} times`);
    const done = new Set<number>();
    for (const entry of journal) {
      if (entry.type === "call.started" && entry.callSeq !== undefined && done.has(entry.callSeq)) v.push(`${run.id}: call ${entry.callSeq} started again after it completed`);
      if ((entry.type === "call.completed" || entry.type === "call.resolved") && entry.callSeq !== undefined) done.add(entry.callSeq);
    }
    // A call a person resolved as done is journaled call.resolved, then call.completed.
    const toolCalls = journal.filter((e) => e.type === "call.completed" && e.data.kind === "tool").length;
    if (toolCalls !== steps) v.push(`${run.id}: ${toolCalls} tool calls completed, planned ${steps}`);
  }
  const keys = (rows: { key: string }[]) => rows.map((r) => r.key);
  const twice = (list: string[]) => list.filter((k, i) => list.indexOf(k) !== i);
  // A worker frozen mid-call finishes that one call when thawed, after another worker took the
  // run over and issued it again: Tether refuses the zombie's writes, but the outside world gets
  // the call twice unless its service refuses stale fencing tokens (see ToolContext.fencingToken).
  // That, for a call in flight at the freeze, is the only duplicate allowed.
  const zombieCall = (key: string, rows: { key: string; pid: number }[]) =>
    zombie !== undefined && zombie.inFlight.has(key) && rows.filter((r) => r.key === key).some((r) => r.pid === zombie.pid);
  for (const key of twice(keys(ledger.appends()))) if (!zombieCall(key, ledger.appends())) v.push(`append ${key} applied twice`);
  for (const key of twice(keys(ledger.drafts()))) if (!zombieCall(key, ledger.drafts())) v.push(`draft ${key} published twice`);
  for (const key of twice(keys(ledger.idempotentWrites()))) v.push(`idempotent write ${key} applied twice`);
  return v;
}

/** Every effect the runs planned, applied exactly once in the ledger (apart from `zombieRows`). */
function effectsApplied(runs: RunRecord[], zombieRows = 0): number {
  const planned = runs.reduce((n, run) => n + planFor(String(run.input)).length, 0);
  const applied = ledger.appends().length + ledger.drafts().length + ledger.idempotentWrites().length;
  expect(applied - zombieRows).toBe(planned);
  return applied;
}

/**
 * The calls that were the worker's when another took its runs over: started and not finished
 * before a `recovery` entry that names it as the previous worker (`runId:callSeq`).
 */
async function callsInFlightAtTakeover(ids: string[], workerId: string): Promise<Set<string>> {
  const open = new Set<string>();
  for (const [id, journal] of await allJournals(ids)) {
    const pending = new Set<number>();
    for (const entry of journal) {
      if (entry.type === "recovery" && entry.data.previousWorker === workerId) for (const seq of pending) open.add(`${id}:${seq}`);
      if (entry.callSeq === undefined) continue;
      if (entry.type === "call.started") pending.add(entry.callSeq);
      else if (entry.type !== "call.progress") pending.delete(entry.callSeq);
    }
  }
  return open;
}

describe("many workers on one PostgreSQL database", () => {
  it("three workers, 50 runs: each completes exactly once, journals gap-free, every effect applied once, the work spread over the workers", async () => {
    // 17 at once each: two workers alone cannot hold all 50, so the third must take some. Nobody
    // dies here, so the lease is long: with the 1 s one a worker starved for a second on a loaded
    // machine was (rightly) taken over, which is the SIGKILL and SIGSTOP tests' subject, not this one's.
    const started = await startWorkers(3, { concurrency: 17, leaseMs: 15_000 });
    const ids = await startRuns(50, 8);
    await waitUntil(async () => (await runsOf(ids)).every((r) => terminal.includes(r.status)), "all 50 runs end", 90_000, 50);
    const runs = await runsOf(ids);
    const journals = await allJournals(ids);
    expect(violations(runs, journals, 8)).toEqual([]);
    // Nobody died: no run was ever taken over.
    expect([...journals.values()].flat().filter((e) => e.type === "recovery")).toEqual([]);
    effectsApplied(runs);
    const pids = new Set([...ledger.appends(), ...ledger.drafts()].map((r) => r.pid));
    for (const worker of started) expect(pids.has(worker.pid), `worker ${worker.pid} executed nothing`).toBe(true);
    // No run was advanced by two workers: every effect of a run came from one process.
    const workersOfRun = new Map<string, Set<number>>();
    for (const r of [...ledger.appends(), ...ledger.drafts()]) workersOfRun.set(r.runId, (workersOfRun.get(r.runId) ?? new Set()).add(r.pid));
    expect(workersOfRun.size, "runs with effects in the ledger").toBeGreaterThan(0);
    expect([...workersOfRun].filter(([, p]) => p.size > 1).map(([id, p]) => `${id}: ${[...p].join(",")}`)).toEqual([]);
  }, 120_000);

  it("SIGKILL one of three mid-run: its runs finish on the others, idempotent effects once, no completed call re-run, in-flight appends uncertain", async () => {
    // 10 at once each: two workers cannot hold all 24 runs, so the victim holds some whichever
    // worker the notifications of the first runs reach first (with 20, two could take them all on
    // a loaded machine and the victim waited for work that never came).
    const [victim] = await startWorkers(3, { concurrency: 10 });
    const ids = await startRuns(24, 12);
    await waitUntil(() => ledger.appends().filter((r) => r.pid === victim.pid).length + ledger.drafts().filter((r) => r.pid === victim.pid).length >= 6, "the victim has applied effects", 60_000);
    const held = (await runsOf(ids)).filter((r) => r.lease?.workerId === `worker-pid-${victim.pid}` && !terminal.includes(r.status)).map((r) => r.id);
    await victim.kill();
    expect(held.length).toBeGreaterThan(0);
    await waitUntil(
      async () => {
        await resolveUncertain(ids);
        return (await runsOf(ids)).every((r) => terminal.includes(r.status));
      },
      "every run ends after the kill",
      120_000,
      100,
    );
    const runs = await runsOf(ids);
    const journals = await allJournals(ids);
    expect(violations(runs, journals, 12)).toEqual([]);
    effectsApplied(runs);
    // The victim's runs were taken over by the survivors, each from its latest snapshot.
    for (const id of held) {
      const recovery = journals.get(id)!.filter((e) => e.type === "recovery");
      expect(recovery.length, `run ${id} was held by the victim`).toBeGreaterThan(0);
      expect(recovery[0].data.previousWorker).toBe(`worker-pid-${victim.pid}`);
      expect(recovery[0].data.worker).not.toBe(`worker-pid-${victim.pid}`);
    }
    // An append in flight at the kill is never guessed: it became uncertain and a person decided.
    for (const [id, journal] of journals) {
      const recoveryAt = journal.findIndex((e) => e.type === "recovery");
      if (recoveryAt === -1) continue;
      const open = journal.slice(0, recoveryAt).filter((e) => e.type === "call.started" && !journal.slice(0, recoveryAt).some((o) => o.callSeq === e.callSeq && o !== e && o.type !== "call.started"));
      for (const call of open.filter((e) => e.data.name === "append_log")) {
        expect(journal.slice(recoveryAt).some((e) => e.type === "call.uncertain" && e.callSeq === call.callSeq), `${id}: append ${call.callSeq} in flight at the kill`).toBe(true);
      }
    }
  }, 180_000);

  it("a worker frozen past its lease (SIGSTOP) and thawed: its writes to the runs it lost are refused and it stops executing them", async () => {
    const pair = await startWorkers(2, { tokensPerSecond: 200 });
    const fencedBy = new Map<number, string[]>();
    for (const worker of pair) {
      const fenced: string[] = [];
      fencedBy.set(worker.pid, fenced);
      worker.onMessage((message) => {
        if (message.type === "fenced") fenced.push(String(message.runId));
      });
    }
    const ids = await startRuns(12, 10);
    // The worker frozen is the first found holding a run mid-way: which of the two claims the runs
    // is a race (under a full suite's load one took all twelve, and the other never held a run).
    let found: ChildWorker | undefined;
    await waitUntil(
      async () => {
        const held = (await runsOf(ids)).find((r) => r.lease && r.step >= 2 && !terminal.includes(r.status));
        found = pair.find((worker) => held?.lease?.workerId === `worker-pid-${worker.pid}`);
        return found !== undefined;
      },
      "a worker holds a run mid-way",
      60_000,
    );
    if (!found) throw new Error("unreachable: waitUntil returned without a worker holding a run");
    const frozen = found;
    const frozenId = `worker-pid-${frozen.pid}`;
    const fenced = fencedBy.get(frozen.pid)!;
    process.kill(frozen.pid, "SIGSTOP");
    const lost = (await runsOf(ids)).filter((r) => r.lease?.workerId === frozenId && !terminal.includes(r.status)).map((r) => r.id);
    expect(lost.length).toBeGreaterThan(0);
    // The other worker takes each of them over once the lease has run out.
    await waitUntil(async () => (await runsOf(lost)).every((r) => r.lease?.workerId !== frozenId), "the runs are taken over", 30_000, 50);
    process.kill(frozen.pid, "SIGCONT");
    await waitUntil(() => lost.some((id) => fenced.includes(id)), "the thawed worker writes to a run it lost", 10_000);
    // Refused, it lets go of every run it lost.
    await waitUntil(
      async () => {
        const executing = await new Promise<string[]>((resolve) => {
          const off = frozen.onMessage((message) => {
            if (message.type !== "executing") return;
            off();
            resolve(message.runIds as string[]);
          });
          frozen.send({ type: "executing", runIds: lost });
        });
        return executing.length === 0;
      },
      "the thawed worker stops executing the runs it lost",
      10_000,
      50,
    );
    await waitUntil(
      async () => {
        await resolveUncertain(ids);
        return (await runsOf(ids)).every((r) => terminal.includes(r.status));
      },
      "every run ends",
      120_000,
      100,
    );
    const runs = await runsOf(ids);
    // The frozen worker's statement may reach the database after the freeze: what was in flight is
    // read from the journal at the takeover, not at the SIGSTOP.
    const inFlight = await callsInFlightAtTakeover(ids, frozenId);
    expect(violations(runs, await allJournals(ids), 10, { pid: frozen.pid, inFlight })).toEqual([]);
    // The extra applications of calls in the zombie window, whichever worker's came first.
    const rows = [...ledger.appends(), ...ledger.drafts()];
    const zombieRows = [...inFlight].reduce((n, key) => {
      const applied = rows.filter((r) => r.key === key);
      return n + (applied.some((r) => r.pid === frozen.pid) ? Math.max(0, applied.length - 1) : 0);
    }, 0);
    effectsApplied(runs, zombieRows);
  }, 180_000);

  it("a pause written by another process reaches the run on its worker, and no call starts after it is applied", async () => {
    await startWorkers(2, { tokensPerSecond: 100 });
    const ids = await startRuns(4, 30);
    await waitUntil(async () => (await runsOf(ids)).every((r) => r.status === "running" && r.step >= 1), "every run is working", 30_000);
    for (const id of ids) await control.pause(id, { actor: "ops", reason: "look first" });
    const paused = await Promise.all(ids.map((id) => control.waitFor(id, ["paused"], { timeoutMs: 10_000 })));
    for (const run of paused) {
      const journal = await store.readJournal(run.id, { limit: 100_000 });
      const pausingAt = journal.findIndex((e) => e.type === "status" && e.data.to === "pausing");
      expect(pausingAt).toBeGreaterThan(0);
      expect(journal.slice(pausingAt).filter((e) => e.type === "call.started")).toEqual([]);
      expect(run.lease).toBeNull();
    }
    // And they go on, from any process, to the end.
    for (const id of ids) await control.resume(id, { actor: "ops" });
    await waitUntil(async () => (await runsOf(ids)).every((r) => r.status === "completed"), "the resumed runs complete", 90_000, 50);
    await sleep(0);
  }, 150_000);
});
