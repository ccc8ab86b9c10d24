import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore, type RunRecord, type Store } from "../../src/index.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import { ChildWorker, projectRoot, waitUntil } from "../crash/child-process.js";
import { chargeAgentName, idempotentAgentName, type LedgerRow } from "./agents.js";

/**
 * A process is SIGKILLed inside a tool call while its lease on the run has 60 s to go; a new
 * process on the same store takes the run back. Each test's timeout is far below the lease, so
 * a run that moves on was taken back because its holder is known dead, not because the lease
 * ran out.
 */
const leaseMs = 60_000;
const testTimeoutMs = 40_000;
const childScript = join(projectRoot, "test/takeover/child.ts");

interface Backend {
  name: string;
  setup(): Promise<void>;
  /** What a child needs to open the store. */
  location(): { dir: string; pg?: { url: string; schema: string } };
  store(): Store;
  cleanup(): Promise<void>;
}

function sqliteBackend(): Backend {
  let dir = "";
  let store: SqliteStore | undefined;
  return {
    name: "SQLite, createTether({ agents, dir })",
    async setup() {
      dir = mkdtempSync(join(tmpdir(), "tether-takeover-"));
    },
    location: () => ({ dir: join(dir, "store") }),
    store() {
      store ??= new SqliteStore({ path: join(dir, "store", "tether.db") });
      return store;
    },
    async cleanup() {
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function postgresBackend(): Backend {
  let db: TempPostgres | undefined;
  let store: Store | undefined;
  let dir = "";
  return {
    name: "PostgreSQL",
    async setup() {
      db = tempPostgres("takeover");
      store = await db.open().open();
      dir = mkdtempSync(join(tmpdir(), "tether-takeover-pg-"));
    },
    location: () => ({ dir, pg: { url: db!.url, schema: db!.schema } }),
    store: () => store!,
    async cleanup() {
      await db?.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

for (const backend of [sqliteBackend(), postgresBackend()]) {
  describe(`a restarted process takes back its runs without waiting out their leases (${backend.name})`, () => {
    const children: ChildWorker[] = [];
    let ledgerDir = "";
    beforeAll(async () => {
      ledgerDir = mkdtempSync(join(tmpdir(), "tether-takeover-ledger-"));
      await backend.setup();
    });
    afterAll(async () => {
      for (const child of children) await child.kill();
      await backend.cleanup();
      rmSync(ledgerDir, { recursive: true, force: true });
    });

    const spawn = async (options: Record<string, unknown>) => {
      const child = await ChildWorker.spawn(childScript, { ...backend.location(), leaseMs, ...options });
      children.push(child);
      return child;
    };
    const ledger = (path: string): LedgerRow[] =>
      readFileSync(path, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as LedgerRow);

    /** Starts a run of `agent` in a first process and SIGKILLs that process inside `hold`. */
    async function killedInsideHold(agent: string, ledgerPath: string): Promise<{ run: RunRecord; deadPid: number }> {
      const first = await spawn({ mode: "start", agent, ledgerPath });
      await waitUntil(() => {
        try {
          return ledger(ledgerPath).some((row) => row.tool === "hold" && row.pid === first.pid);
        } catch {
          return false;
        }
      }, "the first process is inside hold");
      await first.kill();
      const [run] = await backend.store().listRuns({ agent });
      expect(run.status).toBe("running");
      // The dead process's lease still has most of its 60 s to go.
      expect(run.lease!.until - Date.now()).toBeGreaterThan(leaseMs / 2);
      return { run, deadPid: first.pid };
    }

    async function settled(runId: string): Promise<RunRecord> {
      let run: RunRecord | undefined;
      await waitUntil(async () => {
        run = await backend.store().getRun(runId);
        return run !== undefined && ["completed", "paused", "failed", "cancelled"].includes(run.status);
      }, `run ${runId} settles`, testTimeoutMs);
      return run!;
    }

    it(
      "library: a fresh createTether on the store, with no startWorker and no resume, retries the idempotent call in flight and completes the run",
      async () => {
        const ledgerPath = join(ledgerDir, "idempotent.jsonl");
        const { run, deadPid } = await killedInsideHold(idempotentAgentName, ledgerPath);
        const second = await spawn({ mode: "recover", ledgerPath });
        const done = await settled(run.id);
        expect(done.status).toBe("completed");
        const journal = await backend.store().readJournal(run.id, { limit: 1000 });
        const recovery = journal.find((entry) => entry.type === "recovery");
        expect(recovery?.data).toMatchObject({ previousWorker: run.lease!.workerId, holderGone: true });
        // `hold` ran in the dead process and again, with the same key, in the new one; `finish` once, in the new one.
        const rows = ledger(ledgerPath);
        expect(rows.filter((row) => row.tool === "hold").map((row) => row.pid)).toEqual([deadPid, second.pid]);
        expect(new Set(rows.filter((row) => row.tool === "hold").map((row) => row.key)).size).toBe(1);
        expect(rows.filter((row) => row.tool === "finish").map((row) => row.pid)).toEqual([second.pid]);
      },
      testTimeoutMs,
    );

    it(
      "worker (startWorker, as tether worker and serve do): the non-idempotent call in flight becomes uncertain and the run pauses for a person, at once",
      async () => {
        const ledgerPath = join(ledgerDir, "charge.jsonl");
        const { run, deadPid } = await killedInsideHold(chargeAgentName, ledgerPath);
        await spawn({ mode: "worker", ledgerPath });
        const done = await settled(run.id);
        expect(done.status).toBe("paused");
        const journal = await backend.store().readJournal(run.id, { limit: 1000 });
        expect(journal.some((entry) => entry.type === "recovery" && entry.data.holderGone === true)).toBe(true);
        expect(journal.some((entry) => entry.type === "call.uncertain")).toBe(true);
        // Never run twice: only the dead process ever entered `hold`, and nothing ran after it.
        expect(ledger(ledgerPath).map((row) => [row.tool, row.pid])).toEqual([["hold", deadPid]]);
      },
      testTimeoutMs,
    );
  });
}
