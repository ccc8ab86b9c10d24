import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
// The public type of the store (the published .d.ts of the class would need @types/better-sqlite3).
import { SqliteStore } from "../sqlite-store-types.js";

export interface TempSqlite {
  dir: string;
  path: string;
  /** A new connection to the same file (another process would open one). */
  open(): SqliteStore;
  /** Closes every connection opened here and deletes the folder. */
  cleanup(): Promise<void>;
}

/** A SQLite file in a fresh temporary folder. */
export function tempSqlite(prefix = "tether-test-"): TempSqlite {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const path = join(dir, "tether.db");
  const opened: SqliteStore[] = [];
  return {
    dir,
    path,
    open() {
      const store = new SqliteStore({ path });
      opened.push(store);
      return store;
    },
    async cleanup() {
      for (const store of opened) await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
