import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { ToolUnavailableError } from "../engine/errors.js";
import type { Json } from "../engine/json.js";
import { resource, type ResourceDefinition } from "../engine/resource.js";
import { tool, type AnyTool, type ToolContext } from "../engine/tool.js";
import { inputSchemaFromJsonSchema } from "./json-schema-input.js";
import { McpConnection, type McpClient, type McpConnectionOptions, type McpServerParams } from "./mcp-connection.js";
import { McpToolCallError } from "./mcp-errors.js";
import { loadMcpSdk, type McpSdk } from "./mcp-sdk.js";

/**
 * A tool as an MCP server lists it (the SDK's `Tool`), as Tether's own type so the published
 * types do not import the MCP SDK, an optional peer.
 */
export interface McpToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema: { type: "object"; properties?: { [key: string]: object }; required?: string[]; [key: string]: unknown };
  outputSchema?: { [key: string]: unknown };
  annotations?: { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
  execution?: { taskSupport?: "required" | "optional" | "forbidden" };
  _meta?: { [key: string]: unknown };
  [key: string]: unknown;
}

const feature = "mcpTools (MCP servers' tools)";

export interface McpToolsOptions extends McpConnectionOptions {
  /** This server's name, in the resource name (`mcp:<name>`) and messages. Default "mcp". */
  name?: string;
  /** Prepended to every tool name, e.g. "github_" (names are then cut to 64 characters). */
  prefix?: string;
  /** Which of the server's tools to wrap: their MCP names, or a predicate. Default all (but those that require MCP tasks). */
  include?: readonly string[] | ((tool: McpToolInfo) => boolean);
  /**
   * Time a call may go without a response or progress before the client gives up and sends
   * `notifications/cancelled` (progress resets it). Default 5 minutes.
   */
  requestTimeoutMs?: number;
  /** Tools that are safe to retry after a crash. Default none (annotations are only hints). */
  idempotent?(tool: McpToolInfo): boolean;
  /** Close each run's connection while it is paused (default true: a paused run holds nothing). */
  releaseOnPause?: boolean;
}

export interface McpToolset {
  /** The server's tools as Tether tools: abortable, their progress journaled as `call.progress`. */
  readonly tools: AnyTool[];
  /**
   * One connection per run: declare it in the agent's `resources` and each run gets its own
   * session, closed when the run is cancelled or completes (and while it is paused). Runs of
   * agents that do not declare it share `connection`.
   */
  readonly resource: ResourceDefinition<McpConnection>;
  /** The connection tools were listed with, shared by runs that hold no connection of their own. */
  readonly connection: McpConnection;
  /** The tools the server listed, by the Tether name they got. */
  readonly listed: ReadonlyMap<string, McpToolInfo>;
  close(): Promise<void>;
}

const defaultRequestTimeoutMs = 5 * 60_000;

/**
 * Connects to an MCP server (stdio or Streamable HTTP, or a `Client` you connected), lists
 * its tools and wraps each as a Tether tool. A pause or cancel aborts the call's signal, which
 * the MCP client turns into `notifications/cancelled` to the server; an `isError` result is a
 * tool error the model sees; a dead server or closed transport is `ToolUnavailableError`,
 * which pauses the run until a person resumes it (the connection is then reopened).
 */
export async function mcpTools(source: McpServerParams | McpClient, options: McpToolsOptions = {}): Promise<McpToolset> {
  const sdk = await loadMcpSdk(feature);
  const sourceParams = isServerParams(source) ? source : undefined;
  const connection = sourceParams ? McpConnection.to(sourceParams, options) : McpConnection.fromClient(source as McpClient);
  const resourceName = `mcp:${options.name ?? "mcp"}`;
  let listing: McpToolInfo[];
  try {
    listing = await listAllTools((await connection.client()) as unknown as Client);
  } catch (error) {
    await connection.close().catch(() => undefined);
    throw new ToolUnavailableError(resourceName, `cannot list the tools of ${connection.label}: ${messageOf(error)}`, error);
  }
  const include = options.include;
  // A tool that requires MCP's task API cannot be called with tools/call; it is left out.
  const callable = listing.filter((t) => t.execution?.taskSupport !== "required");
  const chosen = callable.filter((t) => (include === undefined ? true : typeof include === "function" ? include(t) : include.includes(t.name)));
  const listed = new Map<string, McpToolInfo>();
  const tools: AnyTool[] = [];
  const perRun = (ctx: ToolContext): McpConnection | undefined => {
    try {
      return ctx.resource<McpConnection>(resourceName);
    } catch {
      return undefined;
    }
  };
  for (const info of chosen) {
    const name = tetherName(options.prefix ?? "", info.name);
    if (listed.has(name)) throw new TypeError(`MCP tools "${listed.get(name)!.name}" and "${info.name}" both become the Tether tool name "${name}"; use another prefix or include`);
    listed.set(name, info);
    tools.push(wrap(sdk, name, info, (ctx) => perRun(ctx) ?? connection, options));
  }
  const runResource = resource<McpConnection>({
    name: resourceName,
    acquire: async () => {
      if (!sourceParams) return connection;
      const own = McpConnection.to(sourceParams, options);
      try {
        await own.client();
      } catch (error) {
        await own.close().catch(() => undefined);
        throw new ToolUnavailableError(resourceName, `cannot connect to ${own.label}: ${messageOf(error)}`, error);
      }
      return own;
    },
    record: (handle) => ({ server: handle.label, pid: handle.pid }),
    release: async (handle) => {
      if (handle && handle !== connection) await handle.close();
    },
    releaseOnPause: options.releaseOnPause ?? true,
  });
  return { tools, resource: runResource, connection, listed, close: () => connection.close() };
}

function isServerParams(source: McpServerParams | McpClient): source is McpServerParams {
  const type = (source as { type?: unknown }).type;
  return typeof (source as { callTool?: unknown }).callTool !== "function" && (type === "stdio" || type === "streamable-http");
}

async function listAllTools(client: Client): Promise<McpToolInfo[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools as McpToolInfo[];
}

/** MCP allows names Tether does not ("a.b", "ns/tool"): other characters become "_". */
function tetherName(prefix: string, mcpName: string): string {
  return `${prefix}${mcpName}`.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
}

function wrap(sdk: McpSdk, name: string, info: McpToolInfo, connectionFor: (ctx: ToolContext) => McpConnection, options: McpToolsOptions): AnyTool {
  const { schema } = inputSchemaFromJsonSchema(info.inputSchema as Json);
  const wrapped = tool({
    name,
    description: info.description ?? info.title ?? info.name,
    input: schema,
    abortable: true,
    idempotent: options.idempotent?.(info) ?? false,
    execute: async (input, ctx) => {
      const connection = connectionFor(ctx);
      let client: Client;
      try {
        client = (await connection.client()) as unknown as Client;
      } catch (error) {
        throw new ToolUnavailableError(name, `cannot connect to ${connection.label}: ${messageOf(error)}`, error);
      }
      let result: CallToolResult;
      try {
        result = (await client.callTool({ name: info.name, arguments: input }, undefined, {
          signal: ctx.signal,
          onprogress: (p) => ctx.progress({ progress: p.progress, ...(p.total !== undefined ? { total: p.total } : {}), ...(p.message !== undefined ? { message: p.message } : {}) }),
          resetTimeoutOnProgress: true,
          timeout: options.requestTimeoutMs ?? defaultRequestTimeoutMs,
        })) as CallToolResult;
      } catch (error) {
        if (ctx.signal.aborted) throw error;
        if (await lostConnection(sdk, error, connection)) throw new ToolUnavailableError(name, `${connection.label} went away during the call: ${connection.lossReason ?? messageOf(error)}`, error);
        throw error;
      }
      if (result.isError) throw new McpToolCallError(name, textOf(result) || `MCP tool ${info.name} reported an error`);
      return outputOf(result);
    },
  });
  // Models see the server's own schema, not a round trip through zod.
  return { ...wrapped, spec: { ...wrapped.spec, inputSchema: info.inputSchema as Json } };
}

/** A transport failure rather than an answer from the server: the server is gone or lost the session. */
async function lostConnection(sdk: McpSdk, error: unknown, connection: McpConnection): Promise<boolean> {
  if (error instanceof sdk.McpError) return error.code === sdk.ErrorCode.ConnectionClosed;
  if (error instanceof sdk.StreamableHTTPError && error.code === 404) {
    await connection.reset();
    return true;
  }
  if (!connection.connected) return true;
  const code = (error as { code?: unknown; cause?: { code?: unknown } })?.cause?.code ?? (error as { code?: unknown })?.code;
  return (typeof code === "string" && /^E[A-Z]+/.test(code)) || /fetch failed|Not connected/i.test(messageOf(error));
}

function textOf(result: CallToolResult): string {
  return result.content
    .filter((c): c is Extract<CallToolResult["content"][number], { type: "text" }> => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

/** Structured content when the server gives it; text as a string; anything else as the content list. */
function outputOf(result: CallToolResult): Json {
  if (result.structuredContent) return result.structuredContent as Json;
  if (result.content.length > 0 && result.content.every((c) => c.type === "text")) return textOf(result);
  return { content: result.content as unknown as Json };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
