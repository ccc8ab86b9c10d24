/**
 * Restart to next step (`npm run bench:takeover`): a process executing a run is SIGKILLed inside
 * a tool call while its lease has 60 s to go, and a new process is started on the same store.
 * Measured from the moment the new process is spawned: until it is ready (Node, tsx and the
 * store opening: the floor), until it has claimed the run (the `recovery` journal entry), and
 * until the run's next step is journaled (the interrupted idempotent call, retried, completes).
 * Two ways to restart: the library (`createTether`, no `startWorker`, no `resume`) and a worker
 * (`startWorker`, as `tether worker` and `tether serve`). SQLite and PostgreSQL (`TAKEOVER_STORES`,
 * `TAKEOVER_SAMPLES`, default 5). Before the holder's process was checked, the next step waited
 * for the lease to run out: up to `leaseMs` (5 s by default, 60 s here).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SqliteStore, type Store } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { testDatabaseUrl } from "../src/testing/temp-postgres.js";
import { ChildWorker, waitUntil } from "../test/crash/child-process.js";
import { idempotentAgentName } from "../test/takeover/agents.js";
import { median } from "./bench-agent.js";

const projectRoot = fileURLToPath(new URL("../", import.meta.url));
const childScript = join(projectRoot, "test/takeover/child.ts");
const samples = Number(process.env.TAKEOVER_SAMPLES ?? 5);
const stores = (process.env.TAKEOVER_STORES ?? "sqlite,postgres").split(",");
const leaseMs = 60_000;

interface Sample {
  readyMs: number;
  claimMs: number;
  nextStepMs: number;
}

async function measure(location: { dir: string; pg?: { url: string; schema: string } }, store: Store, mode: "recover" | "worker", ledgerPath: string): Promise<Sample> {
  writeFileSync(ledgerPath, "");
  const first = await ChildWorker.spawn(childScript, { ...location, leaseMs, mode: "start", agent: idempotentAgentName, ledgerPath });
  await waitUntil(() => readFileSync(ledgerPath, "utf8").includes(`"pid":${first.pid}`), "the first process is inside the tool call");
  await first.kill();
  const [run] = (await store.listRuns({ agent: idempotentAgentName, status: ["running"] })).filter((r) => r.lease?.holder?.pid === first.pid);
  if (!run) throw new Error("the killed process's run is not running");
  const spawnedAt = Date.now();
  const second = await ChildWorker.spawn(childScript, { ...location, leaseMs, mode, ledgerPath });
  const readyAt = Date.now();
  try {
    await waitUntil(async () => (await store.getRun(run.id))?.status === "completed", "the run completes", 30_000);
    const journal = await store.readJournal(run.id, { limit: 1000 });
    const recovery = journal.find((e) => e.type === "recovery" && e.data.holderGone === true);
    const nextStep = journal.find((e) => e.type === "call.completed" && e.seq > (recovery?.seq ?? Infinity));
    if (!recovery || !nextStep) throw new Error("no recovery by a gone holder, or no step after it");
    return { readyMs: readyAt - spawnedAt, claimMs: recovery.at - spawnedAt, nextStepMs: nextStep.at - spawnedAt };
  } finally {
    await second.stop();
  }
}

const dir = mkdtempSync(join(tmpdir(), "tether-takeover-bench-"));
const results: { store: string; restart: string; readyMs: number; claimMs: number; nextStepMs: number; maxNextStepMs: number; nextStepAfterReadyMs: number; samples: number }[] = [];
try {
  for (const storeName of stores) {
    let store: Store;
    let location: { dir: string; pg?: { url: string; schema: string } };
    if (storeName === "postgres") {
      const schema = `takeover_bench_${Date.now().toString(36)}`;
      store = await new PostgresStore({ connectionString: testDatabaseUrl, schema, poolSize: 2 }).open();
      location = { dir, pg: { url: testDatabaseUrl, schema } };
    } else {
      location = { dir: join(dir, "store") };
      store = new SqliteStore({ path: join(location.dir, "tether.db") });
    }
    for (const mode of ["recover", "worker"] as const) {
      const measured: Sample[] = [];
      for (let i = 0; i < samples; i++) {
        const ledgerPath = join(dir, `ledger-${storeName}-${mode}-${i}.jsonl`);
        measured.push(await measure(location, store, mode, ledgerPath));
      }
      const row = {
        store: storeName,
        restart: mode === "recover" ? "library (createTether)" : "worker (startWorker)",
        readyMs: median(measured.map((s) => s.readyMs)),
        claimMs: median(measured.map((s) => s.claimMs)),
        nextStepMs: median(measured.map((s) => s.nextStepMs)),
        maxNextStepMs: Math.max(...measured.map((s) => s.nextStepMs)),
        // What the runtime adds once the process is up (the ready message is sent after createTether returns).
        nextStepAfterReadyMs: median(measured.map((s) => s.nextStepMs - s.readyMs)),
        samples: measured.length,
      };
      results.push(row);
      console.log(`${row.store.padEnd(9)} ${row.restart.padEnd(24)} ready ${row.readyMs} ms, run claimed ${row.claimMs} ms, next step ${row.nextStepMs} ms (max ${row.maxNextStepMs}; ${row.nextStepAfterReadyMs} ms after ready; lease ${leaseMs} ms; median of ${row.samples})`);
    }
    if (store instanceof PostgresStore) await store.dropSchema();
    await store.close();
  }
  writeFileSync(join(projectRoot, "bench-results-takeover.json"), `${JSON.stringify({ at: new Date().toISOString(), load: loadavg().map((l) => Number(l.toFixed(2))), leaseMs, results }, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
