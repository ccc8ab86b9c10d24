import { join } from "node:path";
import type { AgentDefinition } from "./engine/agent.js";
import { Runtime, type RuntimeOptions } from "./engine/runtime.js";
import { SecretRedactor } from "./engine/secrets.js";
import type { Store } from "./engine/store.js";
import type { ModelRegistry } from "./models/model-registry.js";
import { createModelRegistry } from "./models/providers.js";
import { SqliteStore } from "./stores/sqlite-store.js";
import { traceRuns, tracingAvailable, type RunTracingOptions } from "./telemetry/run-tracing.js";

export interface TetherOptions extends Partial<Omit<RuntimeOptions, "store" | "agents" | "resolveModel">> {
  agents: readonly AgentDefinition[];
  /** A store; by default SQLite at `<dir>/tether.db`. */
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

export function defaultDatabasePath(dir = ".tether"): string {
  return join(process.cwd(), dir, "tether.db");
}

/** A runtime with the defaults: the embedded SQLite store, the simulated model and the AI SDK providers. */
export function createTether(options: TetherOptions): Runtime {
  const store = options.store ?? new SqliteStore({ path: options.dir ? join(options.dir, "tether.db") : defaultDatabasePath() });
  const models = options.models ?? createModelRegistry();
  const redactor = options.secrets === false ? undefined : SecretRedactor.fromEnvironment(process.env, options.secrets ?? []);
  const runtime = new Runtime({ ...options, store, agents: options.agents, resolveModel: models.resolver, redactor });
  const tracing = options.tracing ?? tracingAvailable();
  if (tracing !== false) traceRuns(runtime, tracing === true ? {} : tracing);
  return runtime;
}
