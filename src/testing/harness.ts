import type { AgentDefinition } from "../engine/agent.js";
import { Runtime, type RuntimeOptions } from "../engine/runtime.js";
import { ModelRegistry } from "../models/model-registry.js";
// The public type of the store (the published .d.ts of the class would need @types/better-sqlite3).
import type { SqliteStore } from "../sqlite-store-types.js";
import { sequentialIds } from "./sequential-ids.js";
import { tempSqlite, type TempSqlite } from "./temp-store.js";

export type HarnessRuntimeOptions = Partial<Omit<RuntimeOptions, "agents" | "store">> & { store?: SqliteStore };

export interface Harness {
  sqlite: TempSqlite;
  /** The first runtime's store. */
  store: SqliteStore;
  runtime: Runtime;
  /** Another runtime on the same file, with its own connection unless `store` is given (a second process). */
  open(options?: HarnessRuntimeOptions): Runtime;
  /** Closes every runtime and connection and deletes the folder. */
  cleanup(): Promise<void>;
}

/** A runtime on a fresh SQLite file, with deterministic ids and the simulated model as default. */
export function harness(agents: readonly AgentDefinition[], options: HarnessRuntimeOptions = {}): Harness {
  const sqlite = tempSqlite();
  const runtimes: Runtime[] = [];
  let opened = 0;
  const open = (extra: HarnessRuntimeOptions = {}): Runtime => {
    const scope = String.fromCharCode(97 + opened++);
    const runtime = new Runtime({
      resolveModel: new ModelRegistry().resolver,
      ids: sequentialIds(scope),
      workerId: `worker-${scope}`,
      ...extra,
      agents,
      store: extra.store ?? sqlite.open(),
    });
    runtimes.push(runtime);
    return runtime;
  };
  const runtime = open(options);
  return {
    sqlite,
    store: runtime.store as SqliteStore,
    runtime,
    open,
    async cleanup() {
      for (const r of runtimes) await r.close();
      await sqlite.cleanup();
    },
  };
}
