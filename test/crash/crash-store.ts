import { join } from "node:path";
import { SqliteStore, type Store } from "../../src/index.js";
import { PostgresStore } from "../../src/stores/pg-store.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import type { ChildOptions } from "./child.js";

/**
 * Where a crash campaign keeps its runs: a SQLite file in the campaign's folder, or a fresh
 * PostgreSQL schema of its own (in the test database, dropped when the campaign ends unless it
 * is kept for inspection). The parent and every child process open the same place.
 */
export type CrashStoreKind = "sqlite" | "postgres";

export interface CrashStore {
  kind: CrashStoreKind;
  /** What a child process needs to open it. */
  childLocation: Pick<ChildOptions, "dbPath" | "url" | "schema">;
  /** A new store on it (the parent's own connection). */
  open(): Promise<Store>;
  /** Closes what `open` opened; drops a PostgreSQL schema unless `keep`. Returns where the data was kept. */
  finish(keep: boolean): Promise<string | undefined>;
}

export function crashStore(kind: CrashStoreKind, dir: string, name: string): CrashStore {
  if (kind === "sqlite") {
    const path = join(dir, `${name}.db`);
    const opened: SqliteStore[] = [];
    return {
      kind,
      childLocation: { dbPath: path },
      async open() {
        const store = new SqliteStore({ path });
        opened.push(store);
        return store;
      },
      async finish(keep) {
        for (const store of opened.splice(0)) await store.close();
        return keep ? path : undefined;
      },
    };
  }
  const db: TempPostgres = tempPostgres(`crash_${name}`);
  const opened: PostgresStore[] = [];
  return {
    kind,
    childLocation: { url: db.url, schema: db.schema },
    async open() {
      const store = await new PostgresStore({ connectionString: db.url, schema: db.schema, poolSize: 4 }).open();
      opened.push(store);
      return store;
    },
    async finish(keep) {
      for (const store of opened.splice(0)) await store.close();
      if (keep) return `${db.url} schema ${db.schema}`;
      await db.cleanup();
      return undefined;
    },
  };
}
