import Database from "better-sqlite3";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { runCli } from "../cli/program.js";
import { Runtime } from "../engine/runtime.js";
import { restoreState } from "../engine/snapshot.js";
import type { DamagedRun } from "../engine/store.js";
import { ModelRegistry } from "../models/model-registry.js";
import { effectTool, Ledger, sequenceAgent } from "../testing/index.js";
import { perRun } from "./sqlite-schema.js";
import { SqliteStore } from "./sqlite-store.js";
import { verifySqliteStore } from "./sqlite-verify.js";

/**
 * Power-loss style faults on the SQLite store's file: flipped bytes in a journal entry and in a
 * run's stored messages, a truncated file, a WAL that is lost. Each is found (on read, and by
 * `tether verify`), nothing reads back as valid data, and the other runs are untouched.
 */

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const ledger = new Ledger();
const agent = sequenceAgent({
  name: "steps",
  tools: [effectTool({ name: "note", ledger, durationMs: 30 })],
  steps: Array.from({ length: 6 }, (_, i) => ({ tool: "note", input: { id: `note-${i}` } })),
});

function runtimeOn(store: SqliteStore): Runtime {
  return new Runtime({ agents: [agent], store, resolveModel: new ModelRegistry().resolver, workerPollMs: 10, leaseMs: 300 });
}

/** Two completed runs and one paused after its second step, in a closed (checkpointed) file. */
async function storeWithRuns(): Promise<{ path: string; done: string[]; paused: string }> {
  dir = mkdtempSync(join(tmpdir(), "tether-integrity-"));
  const path = join(dir, "tether.db");
  const store = new SqliteStore({ path });
  const runtime = runtimeOn(store);
  runtime.startWorker();
  const done: string[] = [];
  for (let i = 0; i < 2; i++) done.push((await runtime.start("steps", { n: i })).id);
  const paused = (await runtime.start("steps", { n: 2 })).id;
  await runtime.waitFor(paused, (r) => r.step >= 2);
  await runtime.pause(paused, { wait: true });
  for (const id of done) await runtime.waitFor(id, ["completed"]);
  await runtime.close();
  await store.close();
  expect(existsSync(`${path}-wal`)).toBe(false);
  return { path, done, paused };
}

/** Flips one bit of the only place these bytes are in the file: in the middle, or at character `offset` of them. */
function flipInFile(path: string, text: string, offset = Math.floor(Buffer.byteLength(text) / 2)): void {
  const bytes = readFileSync(path);
  const needle = Buffer.from(text);
  const at = bytes.indexOf(needle);
  expect(at).toBeGreaterThan(0);
  expect(bytes.lastIndexOf(needle)).toBe(at);
  bytes[at + offset] ^= 0x01;
  writeFileSync(path, bytes);
}

/** A run's row in the runs table, straight from the file. */
function rawRunDoc(path: string, runId: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT doc FROM runs WHERE id = ?").pluck().get(runId) as string;
  } finally {
    db.close();
  }
}

/** A run's journal rows, straight from the file. */
function rawRows(path: string, runId: string): { k: number; n: number; type: number; data: string }[] {
  const db = new Database(path, { readonly: true });
  try {
    const rk = db.prepare("SELECT rk FROM runs WHERE id = ?").pluck().get(runId) as number;
    return (db.prepare("SELECT k, type, data FROM journal WHERE k >= ? AND k < ? ORDER BY k").all(rk * perRun, (rk + 1) * perRun) as { k: number; type: number; data: string }[]).map(
      (row) => ({ ...row, n: row.k - rk * perRun }),
    );
  } finally {
    db.close();
  }
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [stdout, stderr] = [new PassThrough(), new PassThrough()];
  const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  stdout.on("data", (c: Buffer) => chunks.stdout.push(c));
  stderr.on("data", (c: Buffer) => chunks.stderr.push(c));
  const code = await runCli(["node", "tether", ...args], { stdout, stderr, stdin: new PassThrough() } as never);
  return { code, stdout: Buffer.concat(chunks.stdout).toString(), stderr: Buffer.concat(chunks.stderr).toString() };
}

describe("tether verify and checksummed rows (SQLite)", () => {
  it("finds nothing wrong in a healthy store: every row read, exit code 0", async () => {
    const { path } = await storeWithRuns();
    const report = verifySqliteStore(path);
    expect(report.damage).toEqual([]);
    expect(report.runs).toBe(3);
    expect(report.rows).toBeGreaterThan(30);
    const run = await cli(["--db", path, "verify"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain("3 runs");
    expect(run.stderr).toContain("no damage");
  });

  it("a flipped byte in a completed run's stored messages: refused on read with snapshot_corrupt, named by verify (exit 5); the other runs read and the paused one resumes", async () => {
    const { path, done, paused } = await storeWithRuns();
    const messages = rawRows(path, done[0]).filter((r) => r.type <= 0).at(-1)!;
    flipInFile(path, messages.data);

    const report = verifySqliteStore(path);
    expect(report.damage).toEqual([{ runId: done[0], row: `messages before journal entry ${(messages.n + 1) / 2}`, problem: "fails its checksum" }]);
    expect(report.damagedRuns).toEqual([done[0]]);
    const run = await cli(["--db", path, "verify"]);
    expect(run.code).toBe(5);
    expect(run.stdout).toContain(`${done[0]}\tmessages before journal entry`);
    expect(run.stderr).toContain("1 damaged rows in 1 runs");

    const store = new SqliteStore({ path });
    const runtime = runtimeOn(store);
    try {
      await expect(store.loadState(done[0])).rejects.toMatchObject({ code: "snapshot_corrupt" });
      await expect(store.readMessages(done[0], [0, 1, 2, 3, 4, 5])).rejects.toMatchObject({ code: "snapshot_corrupt" });
      // The journal entries of that run are intact, and so is everything of the others.
      expect((await store.readJournal(done[0], { limit: 1000 })).length).toBeGreaterThan(10);
      expect(restoreState(done[1], await store.loadState(done[1])).state.messages.length).toBe(6);
      runtime.startWorker();
      await runtime.resume(paused);
      expect((await runtime.waitFor(paused, ["completed"])).output).toBe(6);
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("a flipped byte in a journal entry: reading that run's journal is refused with store_corrupt naming the entry; verify names it; the rest reads", async () => {
    const { path, done } = await storeWithRuns();
    const entry = rawRows(path, done[1]).find((r) => r.type > 0 && r.data.includes("note-3"))!;
    flipInFile(path, entry.data);

    const report = verifySqliteStore(path);
    expect(report.damage).toEqual([{ runId: done[1], row: `journal entry ${entry.n / 2}`, problem: "fails its checksum" }]);
    const store = new SqliteStore({ path });
    try {
      await expect(store.readJournal(done[1], { limit: 1000 })).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: done[1], seq: entry.n / 2 }) });
      // Entries before the damaged one still read.
      expect((await store.readJournal(done[1], { limit: entry.n / 2 - 1 })).length).toBe(entry.n / 2 - 1);
      expect((await store.readJournal(done[0], { limit: 1000 })).length).toBeGreaterThan(10);
      expect((await store.getRun(done[1]))?.status).toBe("completed");
    } finally {
      await store.close();
    }
  });

  it("a flipped byte in a completed run's record (still valid JSON: its output 6 reads 7): get is refused with store_corrupt naming the run row; verify names it (exit 5); a listing (`tether ls`) shows the other runs and names it (exit 5); the other runs read and the paused one resumes", async () => {
    const { path, done, paused } = await storeWithRuns();
    const doc = rawRunDoc(path, done[0]);
    const digit = doc.indexOf('"output":6') + '"output":'.length;
    expect(digit).toBeGreaterThan(10);
    flipInFile(path, doc, digit);
    expect(JSON.parse(rawRunDoc(path, done[0])).output).toBe(7);

    const report = verifySqliteStore(path);
    expect(report.damage).toEqual([{ runId: done[0], row: "run row", problem: "fails its checksum" }]);
    expect(report.damagedRuns).toEqual([done[0]]);
    const run = await cli(["--db", path, "verify"]);
    expect(run.code).toBe(5);
    expect(run.stdout).toContain(`${done[0]}\trun row\tfails its checksum`);
    // `tether ls` lists the other runs, names the damaged one and exits 5; --json prints the others.
    const ls = await cli(["--db", path, "ls"]);
    expect(ls.code).toBe(5);
    for (const id of [done[1], paused]) expect(ls.stdout).toContain(id);
    expect(ls.stdout).not.toContain(done[0]);
    expect(ls.stderr).toContain(`damaged: ${done[0]}\tsteps\tcompleted\tthe store at ${path} is damaged: run ${done[0]}: its run row fails its checksum`);
    expect(ls.stderr).toContain(`1 matching run could not be read (a damaged record): ${done[0]}; every other one is listed`);
    const lsJson = await cli(["--db", path, "ls", "--json"]);
    expect(lsJson.code).toBe(5);
    expect((JSON.parse(lsJson.stdout) as { id: string }[]).map((r) => r.id).sort()).toEqual([done[1], paused].sort());
    expect((await cli(["--db", path, "ls", "--status", "paused"])).code).toBe(0);

    const store = new SqliteStore({ path });
    const runtime = runtimeOn(store);
    try {
      await expect(store.getRun(done[0])).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: done[0] }) });
      await expect(store.getRun(done[0])).rejects.toThrow(`run ${done[0]}: its run row fails its checksum`);
      // A listing passes over it, never showing the altered record, names it, and lists the other runs.
      const damaged: DamagedRun[] = [];
      expect((await store.listRuns({}, damaged)).map((r) => r.id).sort()).toEqual([done[1], paused].sort());
      expect(damaged).toEqual([{ id: done[0], agent: "steps", status: "completed", code: "store_corrupt", message: expect.stringContaining(`run ${done[0]}: its run row fails its checksum`) }]);
      // Nothing was deleted: the row is still there, as damaged as it was.
      expect(JSON.parse(rawRunDoc(path, done[0])).output).toBe(7);
      expect((await store.getRun(done[1]))?.output).toBe(6);
      expect((await store.readJournal(done[0], { limit: 1000 })).length).toBeGreaterThan(10);
      runtime.startWorker();
      await runtime.resume(paused);
      expect((await runtime.waitFor(paused, ["completed"])).output).toBe(6);
      // A prune of every finished run passes over the damaged one: its rows stay for a person to look at.
      const pruned = await store.prune({ before: Date.now() + 60_000 });
      expect(pruned.runs).toBe(2);
      expect(await store.getRun(done[1])).toBeUndefined();
      expect(JSON.parse(rawRunDoc(path, done[0])).output).toBe(7);
      expect(rawRows(path, done[0]).length).toBeGreaterThan(10);
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("a completed run's status changed behind Tether's back (to queued): passed over by the claims, never run again; other runs are claimed and run; verify names its run row", async () => {
    const { path, done } = await storeWithRuns();
    const raw = new Database(path);
    raw.prepare("UPDATE runs SET status = 'queued' WHERE id = ?").run(done[1]);
    raw.close();

    expect(verifySqliteStore(path).damage).toEqual([{ runId: done[1], row: "run row", problem: "fails its checksum" }]);
    const store = new SqliteStore({ path });
    const runtime = runtimeOn(store);
    try {
      const entries = (await store.readJournal(done[1], { limit: 1000 })).length;
      expect(await store.findClaimable(Date.now(), 10)).toEqual([]);
      await expect(store.getRun(done[1])).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: done[1] }) });
      runtime.startWorker();
      const fresh = (await runtime.start("steps", { n: 9 })).id;
      expect((await runtime.waitFor(fresh, ["completed"])).output).toBe(6);
      expect((await store.readJournal(done[1], { limit: 1000 })).length).toBe(entries);
      expect((await store.getRun(done[0]))?.status).toBe("completed");
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("a paused run's record damaged: `tether halt` halts every other active run and names the damaged one (exit 5); `tether unhalt` lifts the others and names the one it cannot change", async () => {
    const { path, paused } = await storeWithRuns();
    const doc = rawRunDoc(path, paused);
    const { step } = JSON.parse(doc) as { step: number };
    // One bit of its step's last digit flipped: still valid JSON, but not what Tether wrote.
    flipInFile(path, doc, doc.indexOf(`"step":${step},`) + `"step":${step}`.length - 1);
    expect(JSON.parse(rawRunDoc(path, paused)).step).toBe(step ^ 1);
    const store = new SqliteStore({ path });
    // No worker: the runs it starts wait queued, active runs the halt must reach.
    const runtime = new Runtime({ agents: [agent], store, resolveModel: new ModelRegistry().resolver, worker: false });
    try {
      const fresh = [(await runtime.start("steps", { n: 7 })).id, (await runtime.start("steps", { n: 8 })).id];
      const halt = await cli(["--db", path, "halt", "--reason", "drill"]);
      expect(halt.code).toBe(5);
      expect(halt.stdout).toContain("halted 2 runs (scope *)");
      expect(halt.stdout).toContain(`not halted: ${paused}\tstore_corrupt\tthe store at ${path} is damaged: run ${paused}: its run row fails its checksum`);
      expect(halt.stderr).toContain(`1 run could not be halted: ${paused} (store_corrupt); every other run in scope is halted, and the halt is in force`);
      for (const id of fresh) expect((await store.getRun(id))?.status).toBe("halted");
      expect((await store.listHalts()).map((h) => h.scope)).toEqual(["*"]);
      // The damaged row is as it was: nothing written over it.
      expect(JSON.parse(rawRunDoc(path, paused)).step).toBe(step ^ 1);

      // One halted run's row changed behind Tether's back (a checksummed column): the unhalt lifts the other.
      const raw = new Database(path);
      raw.prepare("UPDATE runs SET lease_until = 1 WHERE id = ?").run(fresh[0]);
      raw.close();
      const unhalt = await cli(["--db", path, "unhalt", "--json"]);
      expect(unhalt.code).toBe(5);
      const lifted = JSON.parse(unhalt.stdout) as { paused: string[]; failed: { runId: string; code: string; message: string }[] };
      expect(lifted.paused).toEqual([fresh[1]]);
      expect(lifted.failed).toEqual([{ runId: fresh[0], code: "store_corrupt", message: expect.stringContaining(`run ${fresh[0]}: its run row fails its checksum`) }]);
      expect((await store.getRun(fresh[1]))?.status).toBe("paused");
      expect(await store.listHalts()).toEqual([]);
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("an executing run's record damaged (its version moved on): a cancel written by another process still reaches the run executing beside it at once, and aborts its call", async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-integrity-"));
    const path = join(dir, "tether.db");
    const waits = new Ledger();
    const slow = sequenceAgent({ name: "slow", tools: [effectTool({ name: "wait", ledger: waits, durationMs: 20_000, abortable: true })], steps: [{ tool: "wait", input: { id: "w" } }] });
    const store = new SqliteStore({ path });
    const worker = new Runtime({ agents: [slow], store, resolveModel: new ModelRegistry().resolver, workerPollMs: 10, leaseMs: 60_000 });
    const other = new SqliteStore({ path });
    const controller = new Runtime({ agents: [slow], store: other, resolveModel: new ModelRegistry().resolver, worker: false });
    try {
      worker.startWorker();
      const [damagedId, id] = [(await worker.start("slow", null)).id, (await worker.start("slow", null)).id];
      await vi.waitFor(() => expect(waits.executionsOf("wait")).toBe(2), { timeout: 10_000 });
      // Its version moved on behind Tether's back: the worker's watcher sees it changed, and cannot read it.
      const raw = new Database(path);
      raw.prepare("UPDATE runs SET doc = json_set(doc, '$.version', json_extract(doc, '$.version') + 100) WHERE id = ?").run(damagedId);
      raw.close();
      await expect(store.getRun(damagedId)).rejects.toMatchObject({ code: "store_corrupt" });
      const asked = Date.now();
      await controller.cancel(id, { actor: "test" });
      expect((await worker.waitFor(id, ["cancelled"], { timeoutMs: 10_000 })).status).toBe("cancelled");
      // The call was aborted, not waited out (it takes 20 s).
      expect(Date.now() - asked).toBeLessThan(10_000);
    } finally {
      await controller.close();
      await other.close();
      await worker.close();
      await store.close();
    }
  });

  it("a truncated file (its last pages gone): verify reports the damage with exit code 5 instead of reading on", async () => {
    const { path } = await storeWithRuns();
    const pageSize = 8192;
    const size = statSync(path).size;
    expect(size).toBeGreaterThan(4 * pageSize);
    truncateSync(path, size - 2 * pageSize);

    const report = verifySqliteStore(path);
    expect(report.damage.length).toBeGreaterThan(0);
    expect(report.damage.some((d) => d.row === "file")).toBe(true);
    console.info(`truncated file: ${report.damage.length} damages, the first: ${report.damage[0].problem}`);
    const run = await cli(["--db", path, "verify"]);
    expect(run.code).toBe(5);
    expect(run.stderr).toMatch(/store_corrupt|damaged/);
  });

  it("the WAL lost (a copy of the .db alone, taken while one run is paused and another runs on): the copy is consistent at a checkpoint, verify finds nothing wrong, and every run it holds goes on", async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-integrity-"));
    const path = join(dir, "tether.db");
    const store = new SqliteStore({ path });
    const runtime = runtimeOn(store);
    runtime.startWorker();
    const done = (await runtime.start("steps", { n: 0 })).id;
    const paused = (await runtime.start("steps", { n: 1 })).id;
    // Paused first: both runs go at the same pace, so the other one's end would be this one's too.
    await runtime.waitFor(paused, (r) => r.step >= 2);
    await runtime.pause(paused, { wait: true });
    await runtime.waitFor(done, ["completed"]);
    store.database.pragma("wal_checkpoint(TRUNCATE)");
    const checkpointed = await store.readJournal(done, { limit: 1000 });
    // After the checkpoint: the paused run resumes and a new run starts, in the WAL (the store's
    // checkpoint thread may copy some of it into the file meanwhile, as it would in real life).
    await runtime.resume(paused);
    const late = (await runtime.start("steps", { n: 2 })).id;
    await runtime.waitFor(late, (r) => r.step >= 1);
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
    mkdirSync(join(dir, "backup"));
    const copy = join(dir, "backup", "tether.db");
    copyFileSync(path, copy);
    await runtime.close();
    await store.close();

    expect(verifySqliteStore(copy).damage).toEqual([]);
    const restored = new SqliteStore({ path: copy });
    const again = runtimeOn(restored);
    try {
      expect(await restored.readJournal(done, { limit: 1000 })).toEqual(checkpointed);
      again.startWorker();
      // Whatever state each run was copied in, it goes on from there: paused ones when resumed,
      // running ones once the dead worker's lease runs out.
      for (const id of [paused, late]) {
        const run = await restored.getRun(id);
        if (run === undefined) continue;
        if (run.status === "paused") await again.resume(id);
        expect((await again.waitFor(id, ["completed"], { timeoutMs: 20_000 })).output).toBe(6);
      }
      expect(await restored.getRun(paused)).toBeDefined();
    } finally {
      await again.close();
      await restored.close();
    }
  });
});
