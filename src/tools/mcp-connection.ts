import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js";
import { loadMcpSdk, type McpSdk } from "./mcp-sdk.js";

// The MCP SDK is an optional peer: it is imported when a connection first connects, and the
// public types here are Tether's own (the published `.d.ts` must not import the SDK).

/**
 * A connected MCP SDK client (`Client` from `@modelcontextprotocol/sdk/client/index.js`).
 * Only what Tether needs is named here; cast to the SDK's `Client` for the rest of its API.
 */
export interface McpClient {
  readonly transport?: unknown;
  listTools(params?: never, options?: never): Promise<unknown>;
  callTool(params: never, resultSchema?: never, options?: never): Promise<unknown>;
  close(): Promise<void>;
}

/** A JSON-RPC 2.0 message as MCP sends it: a request, a notification, a result or an error. */
export type McpJsonRpcMessage =
  | { jsonrpc: "2.0"; id: string | number; method: string; params?: { [key: string]: unknown } }
  | { jsonrpc: "2.0"; method: string; params?: { [key: string]: unknown } }
  | { jsonrpc: "2.0"; id: string | number; result: { [key: string]: unknown } }
  | { jsonrpc: "2.0"; id?: string | number; error: { code: number; message: string; data?: unknown } };

/** How to reach an MCP server: a local process over stdio, or a Streamable HTTP endpoint. */
export type McpServerParams =
  | { type: "stdio"; command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
  | { type: "streamable-http"; url: string | URL; headers?: Record<string, string> };

/** One JSON-RPC message on the wire, as this client sent or received it. */
export interface McpTrafficEvent {
  direction: "sent" | "received";
  message: McpJsonRpcMessage;
  /** Which session (connect) of this process it belongs to: request ids restart in each one. */
  session: number;
}

let sessions = 0;
const livenessTimeoutMs = 5_000;

export interface McpConnectionOptions {
  /** The client name the server sees. Default "tether". */
  clientName?: string;
  /** Every JSON-RPC message sent and received (an audit log, or evidence in tests). */
  onMessage?(event: McpTrafficEvent): void;
  /** The stdio server's stderr, as text (by default it goes to this process's stderr). */
  onStderr?(text: string): void;
}

/**
 * A connection to one MCP server that (re)connects on demand: after the server died or the
 * transport closed, the next `client()` starts a new session (a new process for stdio). A
 * connection made from a `Client` someone else owns cannot reconnect.
 */
export class McpConnection {
  private current: { client: Client; transport: Transport } | undefined;
  private connecting: Promise<Client> | undefined;
  private closedByOwner = false;
  private checking = false;
  /** Why the last session was given up (an HTTP server that stopped answering). */
  private lost: string | undefined;
  readonly label: string;

  private constructor(
    private readonly params: McpServerParams | undefined,
    private readonly options: McpConnectionOptions,
    external?: Client,
  ) {
    if (external) this.current = { client: external, transport: external.transport! };
    this.label = params ? describe(params) : "a client connected by the caller";
  }

  static to(params: McpServerParams, options: McpConnectionOptions = {}): McpConnection {
    return new McpConnection(params, options);
  }

  static fromClient(client: McpClient): McpConnection {
    if (!client.transport) throw new TypeError("fromClient needs a connected MCP client");
    return new McpConnection(undefined, {}, client as unknown as Client);
  }

  get canReconnect(): boolean {
    return this.params !== undefined;
  }

  get connected(): boolean {
    return this.current !== undefined && this.current.client.transport !== undefined;
  }

  get lossReason(): string | undefined {
    return this.lost;
  }

  /** The stdio server's process id while connected. */
  get pid(): number | null {
    const transport = this.current?.transport;
    return this.params?.type === "stdio" && transport ? ((transport as StdioClientTransport).pid ?? null) : null;
  }

  /** The connected client (connecting first if needed). */
  async client(): Promise<McpClient> {
    return this.connectedClient();
  }

  private async connectedClient(): Promise<Client> {
    if (this.closedByOwner) throw new Error(`the connection to ${this.label} was closed`);
    if (this.current && this.connected) return this.current.client;
    if (!this.params) throw new Error(`the connection to ${this.label} is closed and cannot be reopened here`);
    this.connecting ??= this.connect(this.params).finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** Forgets a session that is no longer usable (an HTTP server that lost it), so the next call reconnects. */
  async reset(): Promise<void> {
    if (!this.params) return;
    const current = this.current;
    this.current = undefined;
    if (current) await current.client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closedByOwner = true;
    await this.connecting?.catch(() => undefined);
    const current = this.current;
    this.current = undefined;
    if (current && this.params) await current.client.close();
  }

  private async connect(params: McpServerParams): Promise<Client> {
    const sdk = await loadMcpSdk("MCP tools (mcpTools, McpConnection)");
    const inner = params.type === "stdio" ? this.stdio(sdk, params) : new sdk.StreamableHTTPClientTransport(new URL(params.url), { requestInit: { headers: params.headers } });
    const onMessage = this.options.onMessage;
    const session = ++sessions;
    const transport = onMessage ? new TappedTransport(inner, (direction, message) => onMessage({ direction, message: message as McpJsonRpcMessage, session })) : inner;
    const client = new sdk.Client({ name: this.options.clientName ?? "tether", version: "1" });
    try {
      await client.connect(transport);
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    if (this.closedByOwner) {
      await client.close();
      throw new Error(`the connection to ${this.label} was closed`);
    }
    this.current = { client, transport: inner };
    this.lost = undefined;
    client.onerror = (error) => void this.checkAlive(client, error);
    return client;
  }

  /**
   * A broken HTTP event stream leaves the calls waiting on it pending (the SDK retries a
   * resumable stream, and not all are). Ask the server: if it does not answer, give the session
   * up, which fails its in-flight calls with "Connection closed" and reconnects on the next call.
   */
  private async checkAlive(client: Client, error: Error): Promise<void> {
    if (this.current?.client !== client || this.checking || !/SSE stream disconnected|reconnect/i.test(error.message)) return;
    this.checking = true;
    try {
      await client.ping({ timeout: livenessTimeoutMs });
    } catch (pingError) {
      if (this.current?.client !== client) return;
      this.lost = `${error.message}; the server did not answer a ping (${pingError instanceof Error ? pingError.message : String(pingError)})`;
      this.current = undefined;
      await client.close().catch(() => undefined);
    } finally {
      this.checking = false;
    }
  }

  private stdio(sdk: McpSdk, params: Extract<McpServerParams, { type: "stdio" }>): StdioClientTransport {
    const onStderr = this.options.onStderr;
    const transport = new sdk.StdioClientTransport({ command: params.command, args: params.args, env: params.env, cwd: params.cwd, stderr: onStderr ? "pipe" : "inherit" });
    if (onStderr) transport.stderr?.on("data", (chunk: Buffer) => onStderr(chunk.toString("utf8")));
    return transport;
  }
}

function describe(params: McpServerParams): string {
  return params.type === "stdio" ? `MCP server "${[params.command, ...(params.args ?? [])].join(" ")}" (stdio)` : `MCP server ${String(params.url)} (Streamable HTTP)`;
}

/** Passes everything through to the real transport and reports each message on the way. */
class TappedTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  constructor(
    private readonly inner: Transport,
    private readonly tap: (direction: McpTrafficEvent["direction"], message: JSONRPCMessage) => void,
  ) {}

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion?.(version);
  }

  async start(): Promise<void> {
    this.inner.onmessage = (message, extra) => {
      this.tap("received", message);
      this.onmessage?.(message, extra);
    };
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (error) => this.onerror?.(error);
    await this.inner.start();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    this.tap("sent", message);
    await this.inner.send(message, options);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
