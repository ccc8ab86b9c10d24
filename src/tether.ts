import { join } from "node:path";
import type { AgentDefinition } from "./engine/agent.js";
import { Runtime, type RuntimeOptions } from "./engine/runtime.js";
import { SecretRedactor } from "./engine/secrets.js";
import type { Store } from "./engine/store.js";
import type { ModelRegistry } from "./models/model-registry.js";
import { localProcessProbe } from "./local-process.js";
import { createModelRegistry } from "./models/providers.js";
import { SqliteStore } from "./stores/sqlite-store.js";
import { traceRuns, tracingAvailable, type RunTracingOptions } from "./telemetry/run-tracing.js";

export interface TetherOptions extends Partial<Omit<RuntimeOptions, "store" | "agents" | "resolveModel">> {
  agents: readonly AgentDefinition[];
  /** A store (yours to close); by default SQLite at `<dir>/tether.db`, which the runtime's `close()` closes. */
  store?: Store;
  /** The folder of the embedded store. Default `.tether` in the working folder. */
  dir?: string;
  /** Model strings → models. Default `createModelRegistry()`: simulated, openai, anthropic, openai-compatible. */
  models?: ModelRegistry;
  /**
   * Secret values never to store or send (journal, errors, events, API answers), on top of the
   * environment's: every variable named like `*_API_KEY`, `*_KEY`, `*_TOKEN`, `*_SECRET`,
   * `*_PASSWORD`. `false` turns redaction off.
   */
  secrets?: readonly string[] | false;
  /**
   * OpenTelemetry spans for runs, model calls, tool calls, compensations and control commands
   * (`traceRuns`). Default: on when `@opentelemetry/api` is installed (its tracer is a no-op
   * until you register a provider); `false` turns it off; `true` or options require the package.
   */
  tracing?: boolean | RunTracingOptions;
}

/** A runtime on the SQLite store `createTether` opened for it: closing it closes the store (its checkpoint thread would keep the process alive). */
class OwningRuntime extends Runtime {
  constructor(
    options: RuntimeOptions,
    private readonly ownedStore: Store,
  ) {
    super(options);
  }

  override async close(options: { releaseLeases?: boolean } = {}): Promise<void> {
    await super.close(options);
    await this.ownedStore.close();
  }
}

export function defaultDatabasePath(dir = ".tether"): string {
  return join(process.cwd(), dir, "tether.db");
}

/**
 * A runtime with the defaults: the embedded SQLite store, the simulated model and the AI SDK
 * providers. It takes back on its own the runs a process that died left active on the store
 * (`recoverOrphans`; at once when that process ran on this host), so a restarted program goes on
 * where it was killed without `startWorker()` or `resume`.
 */
export function createTether(options: TetherOptions): Runtime {
  const store = options.store ?? new SqliteStore({ path: options.dir ? join(options.dir, "tether.db") : defaultDatabasePath() });
  const models = options.models ?? createModelRegistry();
  const redactor = options.secrets === false ? undefined : SecretRedactor.fromEnvironment(process.env, options.secrets ?? []);
  const runtimeOptions: RuntimeOptions = {
    recoverOrphans: true,
    processProbe: localProcessProbe(),
    ...options,
    store,
    agents: options.agents,
    resolveModel: models.resolver,
    redactor,
  };
  const runtime = options.store ? new Runtime(runtimeOptions) : new OwningRuntime(runtimeOptions, store);
  const tracing = options.tracing ?? tracingAvailable();
  if (tracing !== false) traceRuns(runtime, tracing === true ? {} : tracing);
  return runtime;
}
