import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { AgentDefinition } from "../engine/agent.js";
import { optionalImport } from "../engine/optional-import.js";
import type { ModelRegistry } from "../models/model-registry.js";
import { UsageError } from "./exit-codes.js";

export interface LoadedAgents {
  agents: AgentDefinition[];
  /** A config may bring its own model registry (providers beyond the simulated model). */
  models?: ModelSource;
  /** Where the agents came from, for the startup banner. */
  source: string;
  /** The same in full, for the error a start of an unknown agent gets: the file, or why none was loaded. */
  origin?: string;
  /** A sample task per agent name (the bundled examples' `exampleTasks`). */
  tasks?: Record<string, string>;
}

export interface BundledAgentOptions {
  dataDir?: string;
  /** Streaming speed of the examples' simulated model. */
  tokensPerSecond?: number;
}

/** A `ModelRegistry`, or anything with its `resolver` (a config may carry its own copy of the package). */
export type ModelSource = Pick<ModelRegistry, "resolver">;

export const configFileNames = ["tether.config.ts", "tether.config.mts", "tether.config.js", "tether.config.mjs"];

/** Imports a module by path; TypeScript goes through tsx when this process is not already running under it. */
export async function importModule(path: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (!/\.[mc]?ts$/.test(path) || code !== "ERR_UNKNOWN_FILE_EXTENSION") throw error;
  }
  // tsx is an optional peer; without it the error names `npm install tsx` (or compile to .js).
  const { tsImport } = await optionalImport<{ tsImport: (specifier: string, parent: string) => Promise<unknown> }>("tsx/esm/api", `loading the TypeScript file ${path} (or compile it to JavaScript and pass the .js file)`);
  return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
}

function isAgent(value: unknown): value is AgentDefinition {
  const v = value as { name?: unknown; init?: unknown; next?: unknown; apply?: unknown; run?: unknown } | null;
  if (typeof v !== "object" || v === null || typeof v.name !== "string" || typeof v.init !== "function") return false;
  return typeof v.run === "function" || (typeof v.next === "function" && typeof v.apply === "function");
}

/** `export default [agents]`, `export default { agents, models }`, or `export const agents = [...]`. */
export function agentsFromModule(loaded: Record<string, unknown>, source: string): { agents: AgentDefinition[]; models?: ModelSource } {
  // A TypeScript file loaded as CommonJS (no "type": "module" above it) arrives wrapped once more.
  const inner = loaded.default as Record<string, unknown> | undefined;
  const module = inner && typeof inner === "object" && !Array.isArray(inner) && "default" in inner && Object.keys(loaded).length === 1 ? inner : loaded;
  const candidates = [module.default, module.agents, (module.default as { agents?: unknown } | undefined)?.agents];
  for (const candidate of candidates) {
    const list = isAgent(candidate) ? [candidate] : Array.isArray(candidate) ? candidate : undefined;
    if (!list) continue;
    const bad = list.findIndex((a) => !isAgent(a));
    if (bad !== -1) throw new UsageError(`${source}: item ${bad} of its agents is not an agent (make it with toolLoopAgent(), durableAgent() or defineAgent())`);
    const models = (module.default as { models?: unknown } | undefined)?.models ?? module.models;
    const isRegistry = typeof (models as Partial<ModelSource> | undefined)?.resolver === "function";
    return { agents: list, models: isRegistry ? (models as ModelSource) : undefined };
  }
  throw new UsageError(`${source} exports no agents: use \`export default [myAgent]\` or \`export const agents = [myAgent]\``);
}

/** The bundled examples (`examples/index.ts`: deep-research, code-agent, browser-flow); they ship with the package. */
export async function loadBundledAgents(options: BundledAgentOptions = {}): Promise<LoadedAgents> {
  const jsPath = fileURLToPath(new URL("../../examples/index.js", import.meta.url));
  const tsPath = jsPath.replace(/\.js$/, ".ts");
  const path = existsSync(jsPath) ? jsPath : tsPath;
  if (!existsSync(path)) throw new Error(`the bundled examples are missing (${path}): reinstall tether-runtime, or pass --agents <module>`);
  const module = await importModule(path);
  const factory = module.bundledAgents;
  if (typeof factory !== "function") throw new Error(`${path} does not export bundledAgents()`);
  const agents = (await (factory as (o: BundledAgentOptions) => unknown)(options)) as unknown;
  if (!Array.isArray(agents) || !agents.every(isAgent)) throw new Error(`bundledAgents() in ${path} did not return agents`);
  const tasks = typeof module.exampleTasks === "object" && module.exampleTasks !== null ? (module.exampleTasks as Record<string, string>) : undefined;
  return { agents, source: "the bundled examples", tasks };
}

/** `--agents <module>`, else `tether.config.*` in `cwd`, else the bundled examples. */
export async function loadAgents(options: { cwd: string; module?: string; dataDir?: string }): Promise<LoadedAgents> {
  if (options.module) {
    const path = resolve(options.cwd, options.module);
    if (!existsSync(path)) throw new UsageError(`--agents ${options.module}: no such file (${path})`);
    return { ...agentsFromModule(await importModule(path), options.module), source: options.module, origin: `--agents ${path}` };
  }
  for (const name of configFileNames) {
    const path = resolve(options.cwd, name);
    if (existsSync(path)) return { ...agentsFromModule(await importModule(path), name), source: name, origin: path };
  }
  const bundled = await loadBundledAgents({ dataDir: options.dataDir });
  return { ...bundled, origin: `the bundled examples, as no --agents <file> was given and ${options.cwd} has no tether.config.ts` };
}
