import { ApiError } from "./api-error.js";
import type { StreamRequest } from "./use-event-stream.js";
import type {
  AgentInfo,
  Budgets,
  CancelPreviewResponse,
  DecisionResponse,
  HaltResponse,
  HaltsResponse,
  Json,
  ResolveAction,
  RunStatus,
  RunView,
  RunsResponse,
  StateResponse,
  UnhaltResponse,
  WhoamiResponse,
} from "./types.js";

export const apiBase = "/api/v1";

type Method = "GET" | "POST" | "DELETE";

/** The HTTP API as the dashboard uses it. One instance per token. */
export class ApiClient {
  constructor(readonly token: string | null) {}

  async call<T>(method: Method, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(apiBase + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (error) {
      throw new ApiError(0, "network_error", `the server cannot be reached (${error instanceof Error ? error.message : String(error)})`);
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const error = (parsed as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)?.error;
      throw new ApiError(response.status, error?.code ?? `http_${response.status}`, error?.message ?? `${method} ${path} answered ${response.status}`, error?.details);
    }
    return parsed as T;
  }

  /** An event stream's request: the token goes in the Authorization header, never in the URL. */
  eventsRequest(path: string): StreamRequest {
    return { url: apiBase + path, headers: this.token ? { authorization: `Bearer ${this.token}` } : {} };
  }

  whoami(): Promise<WhoamiResponse> {
    return this.call("GET", "/whoami");
  }

  agents(): Promise<AgentInfo[]> {
    return this.call<{ agents: AgentInfo[] }>("GET", "/agents").then((r) => r.agents);
  }

  /** The runs, newest first, and those whose record is damaged (named, not listed). */
  runs(options: { status?: readonly RunStatus[]; limit?: number } = {}): Promise<RunsResponse> {
    const query = new URLSearchParams();
    if (options.status?.length) query.set("status", options.status.join(","));
    query.set("limit", String(options.limit ?? 200));
    return this.call<RunsResponse>("GET", `/runs?${query}`);
  }

  run(id: string): Promise<RunView> {
    return this.call<{ run: RunView }>("GET", `/runs/${encodeURIComponent(id)}`).then((r) => r.run);
  }

  state(id: string): Promise<StateResponse> {
    return this.call("GET", `/runs/${encodeURIComponent(id)}/state`);
  }

  cancelPreview(id: string): Promise<CancelPreviewResponse> {
    return this.call("GET", `/runs/${encodeURIComponent(id)}/cancel-preview`);
  }

  start(agent: string, input: Json, budgets?: Budgets): Promise<RunView> {
    return this.call<{ run: RunView }>("POST", "/runs", { agent, input, ...(budgets ? { budgets } : {}) }).then((r) => r.run);
  }

  pause(id: string, reason?: string): Promise<RunView> {
    return this.runCommand(id, "pause", reason ? { reason } : {});
  }

  resume(id: string, options: { reason?: string; force?: boolean; resolve?: ResolveAction | { action: ResolveAction; result?: Json; noResult?: boolean }; budgets?: Budgets } = {}): Promise<RunView> {
    return this.runCommand(id, "resume", options);
  }

  /** `inherited`: what to do with effects a live fork inherited (required when the preview lists any). */
  cancel(id: string, reason?: string, inherited?: "compensate" | "keep"): Promise<RunView> {
    return this.runCommand(id, "cancel", { ...(reason ? { reason } : {}), ...(inherited ? { inherited } : {}) });
  }

  approve(id: string, body: { callSeq?: number; input?: Json; note?: string }): Promise<DecisionResponse> {
    return this.call("POST", `/runs/${encodeURIComponent(id)}/approve`, body);
  }

  reject(id: string, body: { callSeq?: number; note: string }): Promise<DecisionResponse> {
    return this.call("POST", `/runs/${encodeURIComponent(id)}/reject`, body);
  }

  editState(id: string, edit: { message?: string; patch?: { vars: Json } }): Promise<RunView> {
    return this.runCommand(id, "state", edit);
  }

  fork(id: string, fromStep: number): Promise<RunView> {
    return this.runCommand(id, "fork", { fromStep });
  }

  halts(): Promise<HaltsResponse> {
    return this.call("GET", "/halt");
  }

  halt(reason: string, agent?: string): Promise<HaltResponse> {
    return this.call("POST", "/halt", agent ? { reason, agent } : { reason });
  }

  unhalt(agent?: string): Promise<UnhaltResponse> {
    return this.call("DELETE", `/halt${agent ? `?agent=${encodeURIComponent(agent)}` : ""}`);
  }

  private runCommand(id: string, verb: string, body: object): Promise<RunView> {
    return this.call<{ run: RunView }>("POST", `/runs/${encodeURIComponent(id)}/${verb}`, body).then((r) => r.run);
  }
}
