import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type { AgentDefinition } from "../../src/engine/agent.js";
import type { Runtime } from "../../src/engine/runtime.js";
import type { JournalEntry } from "../../src/engine/store.js";
import { tool } from "../../src/engine/tool.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { createModelRegistry } from "../../src/models/providers.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { createTether } from "../../src/tether.js";

export const testModel = "wire-model";
/** A price for the loopback model, in USD per million tokens. */
export const testPrice = { inputPerMTok: 1, outputPerMTok: 4, cachedInputPerMTok: 0.5 };

export interface LookupCall {
  query: string;
}

/** A search tool that records what it was called with. */
export function lookupTool(seen: LookupCall[]) {
  return tool({
    name: "lookup",
    description: "Look a word up",
    input: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      seen.push({ query });
      return { definition: `${query}: a word` };
    },
  });
}

export interface WireRuntime {
  runtime: Runtime;
  store: SqliteStore;
  close(): Promise<void>;
}

/** A real runtime (SQLite in a temp dir, the default model registry) running `agents`. */
export function wireRuntime(agents: AgentDefinition[]): WireRuntime {
  const dir = mkdtempSync(join(tmpdir(), "tether-wire-"));
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  const runtime = createTether({ agents, store, models: createModelRegistry({ env: {} }) });
  runtime.prices.set(`openai-compatible:${testModel}`, testPrice);
  return {
    runtime,
    store,
    async close() {
      await runtime.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function wireAgent(name: string, model: string, seen: LookupCall[]): AgentDefinition {
  return toolLoopAgent({ name, model, system: "You look words up.", tools: [lookupTool(seen)] });
}

export function entriesOf(journal: JournalEntry[], type: string): JournalEntry[] {
  return journal.filter((e) => e.type === type);
}
