import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { TetherClient } from "../client/tether-client.js";
import { TetherError } from "../engine/errors.js";
import { storeLocation, type StoreLocation } from "../stores/open-store.js";

export interface GlobalOptions {
  url: string;
  token?: string;
  db?: string;
  databaseUrl?: string;
  json?: boolean;
  agents?: string;
  /** `--url` was on the command line and no store was: commands go to that server even when TETHER_DB or TETHER_DATABASE_URL is set. */
  serverNamed?: boolean;
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
export async function connect(options: GlobalOptions, needs: { agents?: boolean; create?: boolean } = {}): Promise<Connection> {
  const location = options.serverNamed ? undefined : storeFromOptions(options);
  if (location) {
    if (!needs.create) requireExistingStore(location);
    const { directConnection } = await import("./local-runtime.js");
    return directConnection(location, options, needs);
  }
  return { client: new TetherClient({ baseUrl: options.url, token: options.token }), target: options.url, close: async () => undefined };
}

/**
 * Refuses a SQLite file that does not exist (`not_found`, exit code 4): a mistyped `--db` would
 * otherwise create an empty store and answer "no runs". Only `start` (and `serve`, `worker`,
 * `demo`, `token create`) create one.
 */
export function requireExistingStore(location: StoreLocation): void {
  if (location.kind !== "sqlite" || existsSync(location.path)) return;
  throw new TetherError("not_found", `no Tether store at ${location.path}: check the path (--db or TETHER_DB); \`tether start\`, \`tether serve\` or \`tether worker\` create one`);
}
