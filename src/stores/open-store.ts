import { TetherError } from "../engine/errors.js";
import { requireInstalled } from "../engine/optional-import.js";
import type { Store } from "../engine/store.js";
import type { PostgresStore } from "./pg-store.js";
import { SqliteStore } from "./sqlite-store.js";

/** Where a store lives: an embedded SQLite file, or a PostgreSQL database and schema. */
export type StoreLocation = { kind: "sqlite"; path: string } | { kind: "postgres"; url: string; schema: string };

/** The schema Tether's tables go in on PostgreSQL unless the URL names another (`?schema=`). */
export const defaultPostgresSchema = "tether";

/**
 * A location from a database URL (`postgres://…`, `postgresql://…`; `?schema=name` picks the
 * schema) or a SQLite path. Anything else is refused with `invalid_input`.
 */
export function storeLocation(options: { databaseUrl?: string; path?: string }): StoreLocation | undefined {
  const url = options.databaseUrl?.trim();
  if (url) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      // The URL parser refuses a port out of range as it does garbage: say which it was.
      const port = /^[a-z]+:\/\/[^/?#]*:(\d+)(?:[/?#]|$)/i.exec(url)?.[1];
      if (port !== undefined && Number(port) > 65535) throw new TetherError("invalid_input", `the database URL's port ${port} is out of range (1-65535): expected postgres://user@host:5432/database`);
      throw new TetherError("invalid_input", "the database URL is not a URL: expected postgres://user@host:5432/database");
    }
    if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
      throw new TetherError("invalid_input", `the database URL must start with postgres:// (got ${parsed.protocol}//); for SQLite use --db <path>`);
    }
    const schema = parsed.searchParams.get("schema") ?? defaultPostgresSchema;
    parsed.searchParams.delete("schema");
    return { kind: "postgres", url: parsed.toString(), schema };
  }
  if (options.path) return { kind: "sqlite", path: options.path };
  return undefined;
}

/** The location for messages: a path, or the URL without its password. */
export function describeLocation(location: StoreLocation): string {
  if (location.kind === "sqlite") return location.path;
  const url = new URL(location.url);
  if (url.password) url.password = "***";
  return `${url.toString()} (schema ${location.schema})`;
}

/**
 * Opens the store at a location, ready to use: SQLite is opened (and migrated) at once; a
 * PostgreSQL schema is created or migrated before this resolves. `pg` is an optional
 * dependency, loaded only here.
 */
export async function openStore(location: StoreLocation, options: { create?: boolean } = {}): Promise<Store> {
  if (location.kind === "sqlite") return new SqliteStore({ path: location.path });
  requireInstalled("pg", "the PostgreSQL store");
  const module = await import("./pg-store.js");
  const store: PostgresStore = new module.PostgresStore({ connectionString: location.url, schema: location.schema, create: options.create });
  try {
    return await store.open();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
}
