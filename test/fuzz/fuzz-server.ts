import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { createApp } from "../../src/server/app.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { createApiToken } from "../../src/server/tokens.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "../server/fixture-agents.js";
import { routesOf, type FuzzTarget } from "./api-fuzz.js";
import type { Hono } from "hono";

/** A real server with tokens on, no worker (so only requests change its state), and a few runs in several statuses. */
export async function fuzzServer(): Promise<{ target: FuzzTarget; routes: { method: string; path: string }[]; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "tether-fuzz-"));
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  const runtime = new Runtime({ store, agents: fixtureAgents(), resolveModel: new ModelRegistry().resolver, worker: false });
  const tokens = {
    admin: (await createApiToken(store, { name: "fuzz-admin", role: "admin" })).token,
    operator: (await createApiToken(store, { name: "fuzz-operator", role: "operator" })).token,
    viewer: (await createApiToken(store, { name: "fuzz-viewer", role: "viewer" })).token,
  };
  const queued = await runtime.start("writer", "queued");
  const cancelled = await runtime.start("writer", "cancelled");
  await runtime.cancel(cancelled.id);
  const server: RunningServer = await startServer({ runtime, host: "127.0.0.1", port: 0, version: "fuzz" });
  const routes = routesOf(createApp({ runtime, auth: { mode: "tokens" }, version: "fuzz" }) as unknown as Hono);
  return {
    routes,
    target: {
      url: server.url,
      tokens,
      runIds: [queued.id, cancelled.id],
      async snapshot() {
        const runs = (await runtime.list({ limit: 100_000 })).map((r) => [r.id, r.status, r.statusReason, r.step, r.owner, JSON.stringify(r.budgets)]);
        return JSON.stringify({ runs, halts: await runtime.halts(), tokens: (await store.listTokens()).length });
      },
    },
    async close() {
      await server.close();
      await runtime.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
