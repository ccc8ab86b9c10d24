import type { Store } from "./engine/store.js";
import { SqliteStore as Implementation } from "./stores/sqlite-store.js";

// The public face of the embedded store. The class in `stores/sqlite-store.ts` exposes its
// better-sqlite3 connection (for our tests and the benchmark), and a `.d.ts` that names it
// would make every TypeScript consumer install `@types/better-sqlite3`; this type names only
// what users call. Assigning the class below keeps the two in step.

export interface SqliteStoreOptions {
  /** Path of the database file; ":memory:" for a private in-memory database. */
  path: string;
  /** How long a writer waits for another process's lock before failing. */
  busyTimeoutMs?: number;
}

/** The embedded default store: one SQLite file in WAL mode, shared safely by several processes. */
export interface SqliteStore extends Store {
  readonly kind: "sqlite";
  readonly path: string;
  /** The run's integer key (its journal entries and messages are keyed by it), or undefined. */
  runKey(runId: string): number | undefined;
  changeMarker(): string;
  close(): Promise<void>;
}

export interface SqliteStoreConstructor {
  new (options: SqliteStoreOptions): SqliteStore;
  readonly prototype: SqliteStore;
}

export const SqliteStore: SqliteStoreConstructor = Implementation;
