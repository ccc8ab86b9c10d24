import type { Budgets } from "../engine/budgets.js";
import type { Json } from "../engine/json.js";
import type { DamagedRun, JournalEntry, RunStorage } from "../engine/store.js";
import type {
  AgentInfo,
  ApproveBody,
  CancelBody,
  CancelPreviewResponse,
  DecisionResponse,
  DeltaData,
  EditStateBody,
  ErrorBody,
  ForkBody,
  HaltBody,
  PruneBody,
  PruneResponse,
  StorageResponse,
  HaltResponse,
  HaltsResponse,
  RunsResponse,
  HealthResponse,
  JournalPage,
  ListRunsQuery,
  PauseBody,
  RejectBody,
  ResumeBody,
  RunView,
  StateResponse,
  UnhaltResponse,
} from "../server/api-types.js";
import { TetherError } from "../engine/errors.js";
import { receivedError } from "./received-error.js";
import { SseParser, type SseMessage } from "./sse-parser.js";

export type FetchLike = (request: Request) => Response | Promise<Response>;

export interface TetherClientOptions {
  /** The server, e.g. `http://127.0.0.1:4317` (the `/api/v1` prefix is added). */
  baseUrl: string;
  token?: string;
  /** Another transport, e.g. an in-process `app.fetch`. Default: the global fetch. */
  fetch?: FetchLike;
}

/** A run's event stream, as `GET /runs/:id/events` sends it. */
export type RunStreamEvent =
  | { type: "journal"; id: string; seq: number; entry: JournalEntry }
  | { type: "delta"; id: string; seq: number; sub: number; callSeq: number; text: string; offset: number };

export interface EventsOptions {
  /** Continue after this event id (`"12"` or `"12.3"`), or journal seq. Default: from the start. */
  after?: string | number;
  signal?: AbortSignal;
  /** Reconnect (with Last-Event-ID) when the connection drops. Default true. */
  reconnect?: boolean;
}

const maxReconnectFailures = 5;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function isAbort(error: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || (error instanceof Error && error.name === "AbortError");
}

/** Typed access to every route of the HTTP API (docs/http-api.md). */
export class TetherClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetcher: FetchLike;

  constructor(options: TetherClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    this.token = options.token || undefined;
    this.fetcher = options.fetch ?? ((request) => fetch(request));
  }

  health(): Promise<HealthResponse> {
    return this.request("GET", "/healthz");
  }

  async agents(): Promise<AgentInfo[]> {
    return (await this.request<{ agents: AgentInfo[] }>("GET", "/agents")).agents;
  }

  async start(agent: string, input: Json, options: { budgets?: Budgets; model?: string } = {}): Promise<RunView> {
    return (await this.request<{ run: RunView }>("POST", "/runs", { agent, input, ...options })).run;
  }

  /** The runs that match, newest first; a run whose record is damaged is left out and named in `damaged` when given, as `Runtime.list` does. */
  async list(query: ListRunsQuery = {}, damaged?: DamagedRun[]): Promise<RunView[]> {
    const params = new URLSearchParams();
    if (query.status?.length) params.set("status", query.status.join(","));
    if (query.agent) params.set("agent", query.agent);
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    const body = await this.request<RunsResponse>("GET", `/runs${params.size ? `?${params}` : ""}`);
    damaged?.push(...(body.damaged ?? []));
    return body.runs;
  }

  async get(runId: string): Promise<RunView> {
    return (await this.request<{ run: RunView }>("GET", `/runs/${encodeURIComponent(runId)}`)).run;
  }

  journal(runId: string, options: { after?: number; limit?: number } = {}): Promise<JournalPage> {
    const params = new URLSearchParams();
    if (options.after !== undefined) params.set("after", String(options.after));
    if (options.limit !== undefined) params.set("limit", String(options.limit));
    return this.request("GET", `/runs/${encodeURIComponent(runId)}/journal${params.size ? `?${params}` : ""}`);
  }

  /** Every journal entry after `after`, page by page. */
  async journalAll(runId: string, options: { after?: number } = {}): Promise<JournalEntry[]> {
    const entries: JournalEntry[] = [];
    let after = options.after;
    for (;;) {
      const page = await this.journal(runId, { after, limit: 5000 });
      entries.push(...page.entries);
      if (page.next === null) return entries;
      after = page.next;
    }
  }

  state(runId: string): Promise<StateResponse> {
    return this.request("GET", `/runs/${encodeURIComponent(runId)}/state`);
  }

  cancelPreview(runId: string): Promise<CancelPreviewResponse> {
    return this.request("GET", `/runs/${encodeURIComponent(runId)}/cancel-preview`);
  }

  async pause(runId: string, body: PauseBody = {}): Promise<RunView> {
    return (await this.request<{ run: RunView }>("POST", `/runs/${encodeURIComponent(runId)}/pause`, body)).run;
  }

  async resume(runId: string, body: ResumeBody = {}): Promise<RunView> {
    return (await this.request<{ run: RunView }>("POST", `/runs/${encodeURIComponent(runId)}/resume`, body)).run;
  }

  async cancel(runId: string, body: CancelBody = {}): Promise<RunView> {
    return (await this.request<{ run: RunView }>("POST", `/runs/${encodeURIComponent(runId)}/cancel`, body)).run;
  }

  async editState(runId: string, body: EditStateBody): Promise<RunView> {
    return (await this.request<{ run: RunView }>("POST", `/runs/${encodeURIComponent(runId)}/state`, body)).run;
  }

  /** Sends a message to a run without pausing it; the agent receives it before its next model call. */
  async say(runId: string, text: string): Promise<{ run: RunView; message: { id: string; text: string; actor: string; at: number } }> {
    return this.request("POST", `/runs/${encodeURIComponent(runId)}/messages`, { text });
  }

  /** Approves a call waiting for approval (`callSeq`; without it, every call waiting), optionally with edited arguments (`input`). */
  approve(runId: string, body: ApproveBody = {}): Promise<DecisionResponse> {
    return this.request("POST", `/runs/${encodeURIComponent(runId)}/approve`, body);
  }

  /** Rejects a call waiting for approval: the agent receives `note` as the call's result. */
  reject(runId: string, body: RejectBody): Promise<DecisionResponse> {
    return this.request("POST", `/runs/${encodeURIComponent(runId)}/reject`, body);
  }

  async fork(runId: string, options: { fromStep: number; currentVersion?: boolean }): Promise<RunView> {
    const body: ForkBody = { fromStep: options.fromStep, ...(options.currentVersion ? { currentVersion: true } : {}) };
    return (await this.request<{ run: RunView }>("POST", `/runs/${encodeURIComponent(runId)}/fork`, body)).run;
  }

  halts(): Promise<HaltsResponse> {
    return this.request("GET", "/halt");
  }

  /** What the run takes in the store. */
  async storage(runId: string): Promise<RunStorage> {
    return (await this.request<StorageResponse>("GET", `/runs/${encodeURIComponent(runId)}/storage`)).storage;
  }

  /** Deletes terminal runs last updated before a bound (admin). */
  prune(body: PruneBody): Promise<PruneResponse> {
    return this.request("POST", "/prune", body);
  }

  halt(body: HaltBody): Promise<HaltResponse> {
    return this.request("POST", "/halt", body);
  }

  unhalt(options: { agent?: string; reason?: string } = {}): Promise<UnhaltResponse> {
    const params = new URLSearchParams();
    if (options.agent) params.set("agent", options.agent);
    if (options.reason) params.set("reason", options.reason);
    return this.request("DELETE", `/halt${params.size ? `?${params}` : ""}`);
  }

  /**
   * A run's journal entries and live model text, from `after` on, with no gap and no
   * duplicate across reconnects. Ends when `signal` aborts.
   */
  async *events(runId: string, options: EventsOptions = {}): AsyncGenerator<RunStreamEvent> {
    const path = `/runs/${encodeURIComponent(runId)}/events`;
    for await (const message of this.stream(path, options.after === undefined ? undefined : String(options.after), options)) {
      if (message.event === "journal") {
        const entry = JSON.parse(message.data) as JournalEntry;
        yield { type: "journal", id: message.id ?? String(entry.seq), seq: entry.seq, entry };
      } else if (message.event === "delta") {
        const data = JSON.parse(message.data) as DeltaData;
        const [seq, sub] = (message.id ?? "0.0").split(".").map(Number);
        yield { type: "delta", id: message.id ?? "", seq, sub: sub ?? 0, callSeq: data.callSeq, text: data.text, offset: data.offset ?? 0 };
      }
    }
  }

  /** A run view each time any run changes (`GET /events`). */
  async *runChanges(options: { signal?: AbortSignal; reconnect?: boolean } = {}): AsyncGenerator<RunView> {
    for await (const message of this.stream("/events", undefined, options)) {
      if (message.event === "run") yield JSON.parse(message.data) as RunView;
    }
  }

  private async *stream(path: string, after: string | undefined, options: { signal?: AbortSignal; reconnect?: boolean }): AsyncGenerator<SseMessage> {
    const { signal } = options;
    let lastId = after;
    let failures = 0;
    while (!signal?.aborted) {
      const headers = new Headers({ accept: "text/event-stream" });
      if (lastId !== undefined) headers.set("last-event-id", lastId);
      let response: Response;
      try {
        response = await this.send(new Request(this.url(path), { method: "GET", headers, signal }));
      } catch (error) {
        if (isAbort(error, signal)) return;
        if (options.reconnect === false || ++failures >= maxReconnectFailures) throw error;
        await sleep(Math.min(2_000, 250 * 2 ** failures), signal);
        continue;
      }
      if (!response.ok) throw await this.errorFrom(response);
      const parser = new SseParser();
      const decoder = new TextDecoder();
      const reader = response.body!.getReader();
      const onAbort = () => void reader.cancel().catch(() => undefined);
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          failures = 0;
          for (const message of parser.push(decoder.decode(value, { stream: true }))) {
            if (message.id !== undefined) lastId = message.id;
            yield message;
          }
        }
      } catch (error) {
        if (isAbort(error, signal)) return;
        if (options.reconnect === false) throw error;
      } finally {
        signal?.removeEventListener("abort", onAbort);
        void reader.cancel().catch(() => undefined);
      }
      if (signal?.aborted || options.reconnect === false) return;
      if (++failures >= maxReconnectFailures) {
        throw new TetherError("unreachable", `the event stream from ${this.baseUrl} kept dropping`, { baseUrl: this.baseUrl }, { status: 0 });
      }
      await sleep(Math.min(2_000, 100 * 2 ** failures), signal);
    }
  }

  private url(path: string): string {
    return `${this.baseUrl}/api/v1${path}`;
  }

  private async send(request: Request): Promise<Response> {
    if (this.token) request.headers.set("authorization", `Bearer ${this.token}`);
    try {
      return await this.fetcher(request);
    } catch (error) {
      if (error instanceof Error && error.name === "AbortError") throw error;
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : error instanceof Error ? `: ${error.message}` : "";
      throw new TetherError("unreachable", `cannot reach the Tether server at ${this.baseUrl}${cause}`, { baseUrl: this.baseUrl }, { status: 0, cause: error });
    }
  }

  private async errorFrom(response: Response): Promise<TetherError> {
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text) as ErrorBody;
      if (body?.error?.code) return receivedError(body.error.code, body.error.message, body.error.details, { status: response.status });
    } catch {
      // Not one of ours (a proxy's page): report the status.
    }
    return new TetherError("http_error", `the server answered ${response.status} ${response.statusText}${text ? `: ${text.slice(0, 200)}` : ""}`, { status: response.status }, { status: response.status });
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers = new Headers({ accept: "application/json" });
    if (body !== undefined) headers.set("content-type", "application/json");
    const response = await this.send(new Request(this.url(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
    if (!response.ok) throw await this.errorFrom(response);
    return (await response.json()) as T;
  }
}
