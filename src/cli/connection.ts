import { resolve } from "node:path";
import { TetherClient } from "../client/tether-client.js";

export interface GlobalOptions {
  url: string;
  token?: string;
  db?: string;
  json?: boolean;
  agents?: string;
}

export const defaultUrl = "http://127.0.0.1:4317";
export const defaultDbPath = ".tether/tether.db";

export interface Connection {
  client: TetherClient;
  /** Where commands go, for messages. */
  target: string;
  close(): Promise<void>;
}

/**
 * The API the CLI talks to: the server at `--url`, or with `--db` the same API served in this
 * process over the store file.
 */
export async function connect(options: GlobalOptions, needs: { agents?: boolean } = {}): Promise<Connection> {
  if (options.db) {
    const { directConnection } = await import("./local-runtime.js");
    return directConnection(resolve(options.db), options, needs);
  }
  return { client: new TetherClient({ baseUrl: options.url, token: options.token }), target: options.url, close: async () => undefined };
}
