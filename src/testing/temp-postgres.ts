import { randomBytes } from "node:crypto";
import { PostgresStore } from "../stores/pg-store.js";

/**
 * The PostgreSQL the tests use: `TETHER_TEST_DATABASE_URL`, or the one every development and CI
 * machine runs on 127.0.0.1:5432 (trust auth, database `test`).
 */
export const testDatabaseUrl = process.env.TETHER_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface TempPostgres {
  url: string;
  schema: string;
  /** A new store (its own pool, as another process would have) on the same schema. */
  open(): PostgresStore;
  /** Closes every store opened here and drops the schema. */
  cleanup(): Promise<void>;
}

/** A fresh schema of its own in the test database, dropped by `cleanup`. */
export function tempPostgres(prefix = "t"): TempPostgres {
  const schema = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  const opened: PostgresStore[] = [];
  return {
    url: testDatabaseUrl,
    schema,
    open() {
      const store = new PostgresStore({ connectionString: testDatabaseUrl, schema, poolSize: 4 });
      opened.push(store);
      return store;
    },
    async cleanup() {
      const dropper = new PostgresStore({ connectionString: testDatabaseUrl, schema, poolSize: 1 });
      try {
        for (const store of opened) await store.close();
        await dropper.dropSchema();
      } finally {
        await dropper.close();
      }
    },
  };
}
