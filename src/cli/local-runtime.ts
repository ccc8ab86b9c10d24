import { userInfo } from "node:os";
import { TetherClient } from "../client/tether-client.js";
import type { AgentDefinition } from "../engine/agent.js";
import { Runtime } from "../engine/runtime.js";
import { SecretRedactor } from "../engine/secrets.js";
import { localProcessProbe } from "../local-process.js";
import { createModelRegistry } from "../models/providers.js";
import { createApp } from "../server/app.js";
import { packageVersion } from "../server/package-info.js";
import type { Store } from "../engine/store.js";
import { describeLocation, openStore, type StoreLocation } from "../stores/open-store.js";
import { traceRuns, tracingAvailable } from "../telemetry/run-tracing.js";
import { loadAgents, type LoadedAgents, type ModelSource } from "./agents-loader.js";
import type { Connection, GlobalOptions } from "./connection.js";

/**
 * What only commands that run the engine in this process need (serve, worker, demo, --db).
 * Loaded on demand, so commands that only talk to a server start fast.
 */

/** Who the journal names for commands given straight against a store file. */
export function localActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return "cli";
  }
}

export function describeAgents(loaded: LoadedAgents): string {
  return `${loaded.agents.map((a) => a.name).join(", ")} (from ${loaded.source})`;
}

export interface WorkerSettings {
  /** Runs this process executes at once. */
  concurrency?: number;
  leaseMs?: number;
}

/** A runtime on the store that executes runs (a worker). */
export async function executingRuntime(location: StoreLocation, loaded: LoadedAgents, settings: WorkerSettings = {}): Promise<{ runtime: Runtime; store: Store }> {
  const store = await openStore(location);
  const runtime = new Runtime({
    store,
    agents: loaded.agents,
    resolveModel: (loaded.models ?? createModelRegistry()).resolver,
    redactor: SecretRedactor.fromEnvironment(),
    // A restarted worker takes back the runs its killed predecessor held, without waiting out their leases.
    processProbe: localProcessProbe(),
    ...settings,
  });
  // Spans when @opentelemetry/api is installed and a provider is registered (node --import ./otel-setup.js).
  if (tracingAvailable()) traceRuns(runtime);
  runtime.startWorker();
  return { runtime, store };
}

/**
 * The HTTP API served in this process over the store, with no worker: commands are
 * written to the store, and the process executing the run sees them within its control poll.
 */
export async function directConnection(location: StoreLocation, options: GlobalOptions, needs: { agents?: boolean; create?: boolean }): Promise<Connection> {
  // Only a command that creates a store (start) makes a PostgreSQL schema; the others refuse a missing one, as a missing SQLite file.
  const store = await openStore(location, { create: needs.create === true });
  let agents: AgentDefinition[] = [];
  let models: ModelSource = createModelRegistry();
  let agentSource: string | undefined;
  try {
    if (needs.agents) {
      const loaded = await loadAgents({ cwd: process.cwd(), module: options.agents });
      agents = loaded.agents;
      models = loaded.models ?? models;
      agentSource = loaded.origin;
    }
  } catch (error) {
    await store.close();
    throw error;
  }
  const runtime = new Runtime({ store, agents, resolveModel: models.resolver, worker: false, redactor: SecretRedactor.fromEnvironment() });
  const app = createApp({ runtime, auth: { mode: "off", actor: localActor() }, version: packageVersion(), agentSource });
  // Following a run here polls the store on timers that do not hold the process open.
  const keepAlive = setInterval(() => undefined, 60_000);
  return {
    client: new TetherClient({ baseUrl: "http://tether.local", fetch: (request) => app.fetch(request) }),
    target: describeLocation(location),
    direct: true,
    async close() {
      clearInterval(keepAlive);
      await runtime.close();
      await store.close();
    },
  };
}
