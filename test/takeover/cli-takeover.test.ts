import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createTether, SqliteStore } from "../../src/index.js";
import { projectRoot, waitUntil } from "../crash/child-process.js";
import { idempotentAgentName, takeoverAgents, type LedgerRow } from "./agents.js";

/**
 * `tether worker --lease-ms 60000` SIGKILLed inside a tool call, and started again: the new
 * worker takes the run back at once (the test's timeout is well below the lease).
 */
const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const mainTs = join(projectRoot, "src/cli/main.ts");
const dir = mkdtempSync(join(tmpdir(), "tether-takeover-cli-"));
const dbPath = join(dir, "t.db");
const ledgerPath = join(dir, "ledger.jsonl");
const workers: ChildProcess[] = [];

/** Kills the workers a test left running. */
async function killWorkers(): Promise<void> {
  for (const worker of workers) {
    if (worker.exitCode !== null || worker.signalCode !== null) continue;
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    worker.kill("SIGKILL");
    await exited;
  }
}

afterAll(async () => {
  await killWorkers();
  rmSync(dir, { recursive: true, force: true });
});

function startWorker(block: boolean): ChildProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, TAKEOVER_BLOCK: block ? "1" : "0" };
  for (const name of ["TETHER_URL", "TETHER_TOKEN", "TETHER_DB", "TETHER_DATABASE_URL"]) delete env[name];
  const worker = spawn(process.execPath, ["--import", tsxLoader, mainTs, "--db", dbPath, "worker", "--lease-ms", "60000"], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  workers.push(worker);
  return worker;
}

/** Settles once the worker printed its banner (it is looking for work). */
function started(worker: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    let out = "";
    worker.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("executing runs from")) resolve();
    });
  });
}

function writeConfig(): void {
  writeFileSync(
    join(dir, "tether.config.ts"),
    `import { takeoverAgents } from ${JSON.stringify(join(projectRoot, "test/takeover/agents.ts"))};\nexport default takeoverAgents(${JSON.stringify(ledgerPath)}, { block: process.env.TAKEOVER_BLOCK === "1" });\n`,
  );
}

const ledger = (): LedgerRow[] => {
  try {
    return readFileSync(ledgerPath, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line) as LedgerRow);
  } catch {
    return [];
  }
};

/**
 * A run queued by a process that executes nothing (`store` and `control` read it), and a first
 * worker that has claimed it and is inside its `hold` tool; `fn` goes on from there.
 */
async function withRunInsideHold(fn: (ctx: { store: SqliteStore; runId: string; first: ChildProcess }) => Promise<void>): Promise<void> {
  writeConfig();
  const store = new SqliteStore({ path: dbPath });
  const control = createTether({ agents: takeoverAgents(ledgerPath, { block: false }), store, worker: false, tracing: false });
  try {
    const run = await control.start(idempotentAgentName, null);
    const first = startWorker(true);
    await waitUntil(() => ledger().some((row) => row.tool === "hold" && row.pid === first.pid), "the first worker is inside hold", 30_000);
    await fn({ store, runId: run.id, first });
  } finally {
    await control.close();
    await store.close();
  }
}

describe("tether worker restarted after a SIGKILL", () => {
  it("takes back the run its killed predecessor held, without waiting out the 60 s lease", async () => {
    await withRunInsideHold(async ({ store, runId, first }) => {
      const exited = new Promise((resolve) => first.once("exit", resolve));
      first.kill("SIGKILL");
      await exited;
      expect((await store.getRun(runId))?.lease?.until).toBeGreaterThan(Date.now() + 30_000);
      const second = startWorker(false);
      await waitUntil(async () => (await store.getRun(runId))?.status === "completed", "the restarted worker completes the run", 30_000);
      const journal = await store.readJournal(runId, { limit: 1000 });
      expect(journal.find((e) => e.type === "recovery")?.data).toMatchObject({ holderGone: true, status: "running" });
      expect(ledger().map((row) => [row.tool, row.pid])).toEqual([
        ["hold", first.pid],
        ["hold", second.pid],
        ["finish", second.pid],
      ]);
    });
  }, 45_000);
});

describe("tether worker stopped with SIGTERM", () => {
  it("lets its run go at once: a worker already running takes it over without waiting out the 60 s lease", async () => {
    await killWorkers();
    await withRunInsideHold(async ({ store, runId, first }) => {
      const second = startWorker(false);
      await started(second);
      const stoppedAt = Date.now();
      const exited = new Promise<number | null>((resolve) => first.once("exit", resolve));
      first.kill("SIGTERM");
      expect(await exited).toBe(0);
      await waitUntil(async () => (await store.getRun(runId))?.status === "completed", "the other worker completes the run", 30_000);
      expect(Date.now() - stoppedAt).toBeLessThan(30_000);
      const journal = await store.readJournal(runId, { limit: 1000 });
      const recovery = journal.find((e) => e.type === "recovery" && e.data.previousWorker !== undefined)?.data;
      expect(recovery).toMatchObject({ status: "running" });
      expect(recovery?.holderGone).toBeFalsy();
      expect(ledger().filter((row) => row.pid === first.pid || row.pid === second.pid).map((row) => [row.tool, row.pid])).toEqual([
        ["hold", first.pid],
        ["hold", second.pid],
        ["finish", second.pid],
      ]);
    });
  }, 60_000);
});
