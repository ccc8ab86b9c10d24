import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentDefinition } from "../../src/engine/agent.js";
import { Runtime } from "../../src/engine/runtime.js";
import type { JournalEntry } from "../../src/engine/store.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";

export interface ExampleHarness {
  dir: string;
  runtime: Runtime;
  store: SqliteStore;
  /** Another process, as far as the runs are concerned: a second runtime on the same store, looking for orphaned runs. */
  spawnRuntime(): Runtime;
  /** Resolves with the run's journal once `predicate` holds for it. */
  journalUntil(runId: string, predicate: (journal: readonly JournalEntry[]) => boolean, timeoutMs?: number): Promise<JournalEntry[]>;
  dispose(): Promise<void>;
}

/** A runtime on a fresh SQLite store in a temporary folder, for the examples' tests. */
export function exampleHarness(makeAgents: (dataDir: string) => AgentDefinition[], options: { leaseMs?: number } = {}): ExampleHarness {
  const dir = mkdtempSync(join(tmpdir(), "tether-example-"));
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  const runtimes: Runtime[] = [];
  const makeRuntime = () => {
    const made = new Runtime({ store, agents: makeAgents(join(dir, "data")), resolveModel: new ModelRegistry().resolver, controlPollMs: 5, workerPollMs: 50, leaseMs: options.leaseMs });
    runtimes.push(made);
    return made;
  };
  const runtime = makeRuntime();
  return {
    dir,
    runtime,
    store,
    spawnRuntime() {
      const spawned = makeRuntime();
      spawned.startWorker();
      return spawned;
    },
    journalUntil(runId, predicate, timeoutMs = 20_000) {
      // Subscribed rather than polled, so a test acts at the very step boundary it waited for.
      return new Promise<JournalEntry[]>((resolve, reject) => {
        const journal: JournalEntry[] = [];
        const timer = setTimeout(() => {
          unsubscribe();
          reject(new Error(`timed out waiting for the journal of ${runId}; last: ${journal.slice(-5).map((e) => e.type).join(", ")}`));
        }, timeoutMs);
        const unsubscribe = runtime.subscribe(runId, { pollMs: 10 }, (event) => {
          if (event.kind !== "journal") return;
          journal.push(event.entry);
          if (!predicate(journal)) return;
          clearTimeout(timer);
          unsubscribe();
          resolve(journal);
        });
      });
    },
    async dispose() {
      for (const made of runtimes) await made.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Journal entries of completed calls of one tool. */
export function completedCalls(journal: readonly JournalEntry[], toolName: string): JournalEntry[] {
  return journal.filter((e) => e.type === "call.completed" && e.data.name === toolName);
}

/** The inputs of the calls of `toolName` that started, in order. */
export function startedInputs(journal: readonly JournalEntry[], toolName: string): unknown[] {
  return journal.filter((e) => e.type === "call.started" && e.data.name === toolName).map((e) => e.data.input);
}
