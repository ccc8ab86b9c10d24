import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { AgentDefinition } from "../../src/engine/agent.js";
import type { Json } from "../../src/engine/json.js";
import type { AnyResource } from "../../src/engine/resource.js";
import type { Runtime } from "../../src/engine/runtime.js";
import type { JournalEntry } from "../../src/engine/store.js";
import type { AnyTool } from "../../src/engine/tool.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SimulatedModel } from "../../src/models/simulated-model.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { createTether } from "../../src/tether.js";
import type { McpServerParams, McpTrafficEvent } from "../../src/tools/mcp-connection.js";

const require = createRequire(import.meta.url);
/** The real reference server, `@modelcontextprotocol/server-everything`. */
export const everythingEntry = join(dirname(require.resolve("@modelcontextprotocol/server-everything/package.json")), "dist/index.js");
export const everythingStdio: McpServerParams = { type: "stdio", command: process.execPath, args: [everythingEntry, "stdio"] };
export const fixtureStdio: McpServerParams = { type: "stdio", command: process.execPath, args: [join(dirname(fileURLToPath(import.meta.url)), "fixtures/abortable-mcp-server.mjs")] };

/** Records the JSON-RPC traffic of a connection, with times. */
export class Traffic {
  readonly events: (McpTrafficEvent & { at: number })[] = [];
  readonly onMessage = (event: McpTrafficEvent) => void this.events.push({ ...event, at: performance.now() });

  sent(method: string): (JSONRPCMessage & { at: number; session: number })[] {
    return this.events.filter((e) => e.direction === "sent" && "method" in e.message && e.message.method === method).map((e) => ({ ...e.message, at: e.at, session: e.session }));
  }

  /** The latest `tools/call` request for an MCP tool: its id and session. */
  lastCall(toolName: string): CallRef {
    const calls = this.events.filter((e) => e.direction === "sent" && "method" in e.message && e.message.method === "tools/call" && (e.message.params as { name?: string }).name === toolName);
    if (!calls.length) throw new Error(`no tools/call for ${toolName}`);
    const last = calls[calls.length - 1];
    return { id: (last.message as { id: number | string }).id, session: last.session };
  }

  /** Responses (result or error) the server sent for a request. */
  responsesTo(call: CallRef): JSONRPCMessage[] {
    return this.events.filter((e) => e.session === call.session && e.direction === "received" && "id" in e.message && e.message.id === call.id && !("method" in e.message)).map((e) => e.message);
  }

  /** Progress notifications the server sent for a request (the client uses the request id as the token). */
  progressFor(call: CallRef): { at: number; progress: number }[] {
    return this.events
      .filter((e) => e.session === call.session && e.direction === "received" && "method" in e.message && e.message.method === "notifications/progress" && (e.message.params as { progressToken?: unknown }).progressToken === call.id)
      .map((e) => ({ at: e.at, progress: Number((e.message as unknown as { params: { progress: number } }).params.progress) }));
  }
}

export interface CallRef {
  id: number | string;
  session: number;
}

/** A deterministic model: call `toolName` with `input` once, then answer with what it returned. */
export function callOnceAgent(name: string, call: { toolName: string; input: Json }, tools: AnyTool[], resources: AnyResource[] = []): AgentDefinition {
  const model = new SimulatedModel({
    tokensPerSecond: Infinity,
    script: ({ turn, lastToolResults }) =>
      turn === 0 ? { text: `Calling ${call.toolName}.`, toolCalls: [call] } : { text: `Result: ${JSON.stringify(lastToolResults[0]?.content ?? null)}` },
  });
  return toolLoopAgent({ name, model, tools, resources });
}

export interface McpRuntime {
  runtime: Runtime;
  close(): Promise<void>;
}

export function mcpRuntime(agents: AgentDefinition[]): McpRuntime {
  const dir = mkdtempSync(join(tmpdir(), "tether-mcp-"));
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  const runtime = createTether({ agents, store, models: new ModelRegistry() });
  return {
    runtime,
    async close() {
      await runtime.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function until<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function journalOf(runtime: Runtime, runId: string, type: string): Promise<JournalEntry[]> {
  return (await runtime.journal(runId)).filter((e) => e.type === type);
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
