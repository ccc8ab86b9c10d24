import { resolve } from "node:path";
import { TetherClient } from "../client/tether-client.js";
import { storeLocation, type StoreLocation } from "../stores/open-store.js";

export interface GlobalOptions {
  url: string;
  token?: string;
  db?: string;
  databaseUrl?: string;
  json?: boolean;
  agents?: string;
}

export const defaultUrl = "http://127.0.0.1:4317";
export const defaultDbPath = ".tether/tether.db";

export interface Connection {
  client: TetherClient;
  /** Where commands go, for messages. */
  target: string;
  /** The CLI works on the store itself (`--db`, `--database-url`): it writes runs and commands, and executes none. */
  direct?: boolean;
  close(): Promise<void>;
}

/**
 * The store the options name: `--database-url` (or TETHER_DATABASE_URL) for PostgreSQL, else
 * `--db` (or TETHER_DB) for a SQLite file, else `fallbackPath` when given.
 */
export function storeFromOptions(options: GlobalOptions, fallbackPath?: string): StoreLocation | undefined {
  const path = options.db ?? fallbackPath;
  return storeLocation({ databaseUrl: options.databaseUrl, path: path === undefined ? undefined : resolve(path) });
}

/**
 * The API the CLI talks to: the server at `--url`, or with `--db` or `--database-url` the same
 * API served in this process over the store.
 */
export async function connect(options: GlobalOptions, needs: { agents?: boolean } = {}): Promise<Connection> {
  const location = storeFromOptions(options);
  if (location) {
    const { directConnection } = await import("./local-runtime.js");
    return directConnection(location, options, needs);
  }
  return { client: new TetherClient({ baseUrl: options.url, token: options.token }), target: options.url, close: async () => undefined };
}
