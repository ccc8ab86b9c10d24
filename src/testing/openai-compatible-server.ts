import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { tokenize } from "../models/simulated-model.js";

/**
 * A loopback server that speaks the OpenAI chat-completions API (streaming SSE and plain JSON)
 * with scripted responses, token pacing and error injection, and records what it saw:
 * each request's body, how many chunks it was sent, and whether the client closed the
 * connection before the response ended. Point `@ai-sdk/openai-compatible` (or the model
 * string `openai-compatible:<server.baseURL>#<model>`) at it to test pause, resume, errors
 * and usage over a real HTTP wire, offline.
 */

export interface ScriptedToolCall {
  name: string;
  /** JSON text of the arguments (need not be valid: that is how bad arguments are tested). */
  arguments: string;
  id?: string;
}

export interface ScriptedUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens?: number;
}

export interface ScriptedCompletion {
  type?: "completion";
  /** The assistant's text: a string (split into ~4-character tokens) or the chunks to send. */
  text?: string | string[];
  toolCalls?: ScriptedToolCall[];
  /** Characters of a tool call's arguments per chunk. Default 8. */
  argumentChunkChars?: number;
  /** Reported in the final chunk when the client asked for `stream_options.include_usage`. Default: counted. */
  usage?: ScriptedUsage;
  finishReason?: string;
  /** Milliseconds between chunks; overrides the server's. */
  chunkDelayMs?: number;
  /** Milliseconds before the response starts (a slow provider), streaming or not; a client that closes meanwhile gets nothing. */
  responseDelayMs?: number;
  /** Destroy the connection after this many chunks, without an error or `[DONE]`. */
  dropAfterChunks?: number;
}

export interface ScriptedError {
  type: "error";
  status: number;
  message: string;
  /** OpenAI's `error.type`, e.g. `rate_limit_error`. Default by status. */
  errorType?: string;
  code?: string;
  headers?: Record<string, string>;
}

export type ScriptedResponse = ScriptedCompletion | ScriptedError;

export interface ChatCompletionRequestBody {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string; description?: string; parameters?: unknown } }[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [key: string]: unknown;
}

export interface RecordedRequest {
  index: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: ChatCompletionRequestBody | undefined;
  /** `performance.now()` when the request arrived. */
  receivedAt: number;
  status: number | undefined;
  chunksSent: number;
  /** `performance.now()` when the response was complete. */
  endedAt: number | undefined;
  /** `performance.now()` when the connection closed before the response was complete (the client went away). */
  closedEarlyAt: number | undefined;
}

export type Responder = (request: RecordedRequest) => ScriptedResponse;

export interface OpenAICompatibleServerOptions {
  /** Responses in order, one per chat-completions request; `enqueue` adds more. */
  responses?: ScriptedResponse[];
  /** Used when the queue is empty. Default: an error saying the script ran out. */
  responder?: Responder;
  /** Milliseconds between streamed chunks. Default 0. */
  chunkDelayMs?: number;
}

interface Waiter {
  check: () => boolean;
  resolve: () => void;
}

export class OpenAICompatibleServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedResponse[];
  private responder: Responder | undefined;
  private readonly chunkDelayMs: number;
  private waiters: Waiter[] = [];
  private readonly open = new Set<ServerResponse>();
  private completionCounter = 0;

  private constructor(
    private readonly server: Server,
    options: OpenAICompatibleServerOptions,
  ) {
    this.queue = [...(options.responses ?? [])];
    this.responder = options.responder;
    this.chunkDelayMs = options.chunkDelayMs ?? 0;
    server.on("request", (req, res) => void this.handle(req, res));
  }

  static async start(options: OpenAICompatibleServerOptions = {}): Promise<OpenAICompatibleServer> {
    const server = createServer();
    const instance = new OpenAICompatibleServer(server, options);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return instance;
  }

  /** `http://127.0.0.1:<port>/v1`: the `baseURL` of an OpenAI-compatible client. */
  get baseURL(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/v1`;
  }

  /** The model string for Tether's registry: `openai-compatible:<baseURL>#<model>`. */
  modelString(model: string): string {
    return `openai-compatible:${this.baseURL}#${model}`;
  }

  enqueue(...responses: ScriptedResponse[]): this {
    this.queue.push(...responses);
    return this;
  }

  respondWith(responder: Responder | undefined): this {
    this.responder = responder;
    return this;
  }

  /** Chat-completions requests only. */
  get completions(): RecordedRequest[] {
    return this.requests.filter((r) => r.body !== undefined);
  }

  /** Resolves when `predicate` holds (checked on every request, chunk and close). */
  waitUntil(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`OpenAICompatibleServer: condition not met within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter: Waiter = {
        check: predicate,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Resolves with the n-th chat-completions request (0-based) once it has arrived. */
  async nthCompletion(n: number, timeoutMs?: number): Promise<RecordedRequest> {
    await this.waitUntil(() => this.completions.length > n, timeoutMs);
    return this.completions[n];
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private notify(): void {
    const ready = this.waiters.filter((w) => w.check());
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const record: RecordedRequest = {
      index: this.requests.length,
      method: req.method ?? "GET",
      path: req.url ?? "/",
      headers: { ...req.headers },
      body: undefined,
      receivedAt: performance.now(),
      status: undefined,
      chunksSent: 0,
      endedAt: undefined,
      closedEarlyAt: undefined,
    };
    this.open.add(res);
    res.on("close", () => {
      this.open.delete(res);
      if (!res.writableFinished && record.closedEarlyAt === undefined) record.closedEarlyAt = performance.now();
      this.notify();
    });
    const raw = await readBody(req);
    if (req.method !== "POST" || !req.url?.replace(/\?.*$/, "").endsWith("/chat/completions")) {
      this.requests.push(record);
      this.notify();
      return this.sendError(res, record, { type: "error", status: 404, message: `no route for ${req.method} ${req.url}`, errorType: "invalid_request_error" });
    }
    try {
      record.body = JSON.parse(raw) as ChatCompletionRequestBody;
    } catch {
      this.requests.push(record);
      this.notify();
      return this.sendError(res, record, { type: "error", status: 400, message: "request body is not JSON", errorType: "invalid_request_error" });
    }
    this.requests.push(record);
    this.notify();
    const scripted = this.queue.shift() ?? this.responder?.(record) ?? { type: "error", status: 500, message: "OpenAICompatibleServer: no scripted response left", errorType: "server_error" };
    if (scripted.type === "error") return this.sendError(res, record, scripted);
    if (scripted.responseDelayMs) await sleep(scripted.responseDelayMs);
    if (res.destroyed) return;
    if (record.body.stream) await this.stream(res, record, scripted);
    else this.sendJson(res, record, scripted);
  }

  private sendError(res: ServerResponse, record: RecordedRequest, error: ScriptedError): void {
    record.status = error.status;
    const body = { error: { message: error.message, type: error.errorType ?? defaultErrorType(error.status), param: null, code: error.code ?? null } };
    res.writeHead(error.status, { "content-type": "application/json", ...error.headers });
    res.end(JSON.stringify(body), () => {
      record.endedAt = performance.now();
      this.notify();
    });
  }

  private completionId(): string {
    this.completionCounter += 1;
    return `chatcmpl-${this.completionCounter}`;
  }

  private sendJson(res: ServerResponse, record: RecordedRequest, script: ScriptedCompletion): void {
    const body = record.body!;
    const text = textChunks(script.text).join("");
    const toolCalls = (script.toolCalls ?? []).map((call, i) => ({ id: call.id ?? `call_${record.index}_${i}`, type: "function", function: { name: call.name, arguments: call.arguments } }));
    const usage = usageOf(script, body, textChunks(script.text).length);
    record.status = 200;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: this.completionId(),
        object: "chat.completion",
        created: 0,
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: text || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, finish_reason: finishReason(script) }],
        usage,
      }),
      () => {
        record.endedAt = performance.now();
        this.notify();
      },
    );
  }

  private async stream(res: ServerResponse, record: RecordedRequest, script: ScriptedCompletion): Promise<void> {
    const body = record.body!;
    const id = this.completionId();
    const base = { id, object: "chat.completion.chunk", created: 0, model: body.model };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
    const texts = textChunks(script.text);
    const events: unknown[] = [chunk({ role: "assistant", content: "" })];
    for (const text of texts) events.push(chunk({ content: text }));
    const size = Math.max(1, script.argumentChunkChars ?? 8);
    (script.toolCalls ?? []).forEach((call, index) => {
      events.push(chunk({ tool_calls: [{ index, id: call.id ?? `call_${record.index}_${index}`, type: "function", function: { name: call.name, arguments: "" } }] }));
      for (let i = 0; i < call.arguments.length; i += size) events.push(chunk({ tool_calls: [{ index, function: { arguments: call.arguments.slice(i, i + size) } }] }));
    });
    events.push(chunk({}, finishReason(script)));
    if (body.stream_options?.include_usage) events.push({ ...base, choices: [], usage: usageOf(script, body, texts.length) });
    const delayMs = script.chunkDelayMs ?? this.chunkDelayMs;
    record.status = 200;
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    res.flushHeaders();
    for (const event of events) {
      if (res.destroyed) return;
      if (script.dropAfterChunks !== undefined && record.chunksSent >= script.dropAfterChunks) {
        res.destroy();
        return;
      }
      // Waiting for the flush keeps pacing honest and lets a drop happen after the chunks arrived.
      await writeFlushed(res, `data: ${JSON.stringify(event)}\n\n`);
      record.chunksSent += 1;
      this.notify();
      if (delayMs > 0) await sleep(delayMs);
    }
    if (res.destroyed) return;
    res.end("data: [DONE]\n\n", () => {
      record.endedAt = performance.now();
      this.notify();
    });
  }
}

/** Starts an `OpenAICompatibleServer` on 127.0.0.1 at a free port. */
export function startOpenAICompatibleServer(options?: OpenAICompatibleServerOptions): Promise<OpenAICompatibleServer> {
  return OpenAICompatibleServer.start(options);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Resolves once the data reached the socket, or the connection closed. */
function writeFlushed(res: ServerResponse, data: string): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("close", done);
      resolve();
    };
    res.once("close", done);
    res.write(data, done);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function textChunks(text: string | string[] | undefined): string[] {
  if (text === undefined) return [];
  return typeof text === "string" ? tokenize(text) : text;
}

function finishReason(script: ScriptedCompletion): string {
  return script.finishReason ?? (script.toolCalls?.length ? "tool_calls" : "stop");
}

function usageOf(script: ScriptedCompletion, body: ChatCompletionRequestBody, textChunkCount: number) {
  const counted: ScriptedUsage = script.usage ?? {
    promptTokens: Math.ceil(JSON.stringify(body.messages).length / 4),
    completionTokens: textChunkCount + (script.toolCalls ?? []).reduce((n, c) => n + Math.ceil(c.arguments.length / 4) + 2, 0),
  };
  return {
    prompt_tokens: counted.promptTokens,
    completion_tokens: counted.completionTokens,
    total_tokens: counted.promptTokens + counted.completionTokens,
    ...(counted.cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: counted.cachedTokens } } : {}),
  };
}

function defaultErrorType(status: number): string {
  if (status === 401) return "invalid_request_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}
