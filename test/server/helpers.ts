import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock, type Clock } from "../../src/engine/clock.js";
import { Runtime, type RuntimeOptions } from "../../src/engine/runtime.js";
import type { JournalEntry, RunRecord } from "../../src/engine/store.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { SseParser, type SseMessage } from "../../src/client/sse-parser.js";
import { createApp, type AppOptions } from "../../src/server/app.js";
import type { AuthOptions } from "../../src/server/auth.js";
import type { Role } from "../../src/server/api-types.js";
import { createApiToken } from "../../src/server/tokens.js";
import { fixtureAgents, type FixtureLog, type FixtureOptions } from "./fixture-agents.js";

/** A clock that runs at real speed but can be moved forward (to make snapshots stale). */
export class OffsetClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }
}

export interface CallOptions {
  body?: unknown;
  /** Sent as is (for malformed JSON); wins over `body`. */
  raw?: BodyInit;
  token?: string;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  body: any;
  headers: Headers;
}

export interface TestEnv {
  dir: string;
  dbPath: string;
  store: SqliteStore;
  runtime: Runtime;
  clock: OffsetClock;
  log: FixtureLog;
  app: ReturnType<typeof createApp>;
  tokens: Record<Role, string>;
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  request(method: string, path: string, options?: CallOptions): Request;
  close(): Promise<void>;
}

export async function makeEnv(
  options: { auth?: AuthOptions; fixture?: FixtureOptions; runtime?: Partial<RuntimeOptions>; app?: Partial<AppOptions>; withTokens?: boolean } = {},
): Promise<TestEnv> {
  const dir = mkdtempSync(join(tmpdir(), "tether-api-"));
  const dbPath = join(dir, "tether.db");
  const store = new SqliteStore({ path: dbPath });
  const clock = new OffsetClock();
  const log: FixtureLog = { executed: [], compensated: [] };
  const runtime = new Runtime({
    store,
    agents: fixtureAgents(options.fixture, log),
    resolveModel: new ModelRegistry().resolver,
    clock,
    compensation: { backoffMs: 10 },
    ...options.runtime,
  });
  runtime.startWorker();
  const tokens = {} as Record<Role, string>;
  if (options.withTokens !== false) {
    for (const role of ["viewer", "operator", "admin"] as const) tokens[role] = (await createApiToken(store, { name: `${role}-token`, role })).token;
  }
  const app = createApp({ runtime, auth: options.auth ?? { mode: "tokens" }, version: "test", heartbeatMs: 200, ...options.app });
  const request = (method: string, path: string, call: CallOptions = {}) => {
    const headers = new Headers(call.headers);
    if (call.token) headers.set("authorization", `Bearer ${call.token}`);
    let body: BodyInit | undefined = call.raw;
    if (body === undefined && call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers.set("content-type", "application/json");
    }
    const init: RequestInit & { duplex?: "half" } = { method, headers, body };
    if (body instanceof ReadableStream) init.duplex = "half";
    return new Request(`http://tether.test${path.startsWith("/api/") || !path.startsWith("/") ? path : `/api/v1${path}`}`, init);
  };
  return {
    dir,
    dbPath,
    store,
    runtime,
    clock,
    log,
    app,
    tokens,
    request,
    async call(method, path, call = {}) {
      const response = await app.fetch(request(method, path, call));
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON (static files).
      }
      return { status: response.status, body, headers: response.headers };
    },
    async close() {
      await runtime.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads an event stream from an in-process Response. */
export class SseReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly parser = new SseParser();
  private readonly decoder = new TextDecoder();
  private readonly queue: SseMessage[] = [];
  /** Raw text received, comments included. */
  raw = "";

  constructor(readonly response: Response) {
    this.reader = response.body!.getReader();
  }

  async next(timeoutMs = 10_000): Promise<SseMessage> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([
        this.reader.read(),
        new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), left))),
      ]);
      clearTimeout(timer);
      if (result === "timeout") continue;
      if (result.done) throw new Error("the stream ended");
      const text = this.decoder.decode(result.value, { stream: true });
      this.raw += text;
      this.queue.push(...this.parser.push(text));
    }
    return this.queue.shift()!;
  }

  /** Messages until `stop` says so (the message that stops is included). */
  async until(stop: (message: SseMessage) => boolean, timeoutMs = 15_000): Promise<SseMessage[]> {
    const messages: SseMessage[] = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const message = await this.next(Math.max(1, deadline - Date.now()));
      messages.push(message);
      if (stop(message)) return messages;
    }
  }

  async close(): Promise<void> {
    await this.reader.cancel().catch(() => undefined);
  }
}

export function isTerminalStatusEntry(message: SseMessage): boolean {
  if (message.event !== "journal") return false;
  const entry = JSON.parse(message.data) as JournalEntry;
  return entry.type === "status" && ["completed", "failed", "cancelled"].includes(String(entry.data.to));
}

/** The parts of a run record a refused request must not change. */
export function stableFields(run: RunRecord) {
  const { version: _version, journalSeq: _journalSeq, updatedAt: _updatedAt, lease: _lease, ...rest } = run;
  return rest;
}

export async function journalOf(env: TestEnv, runId: string): Promise<JournalEntry[]> {
  return env.store.readJournal(runId, { limit: 100_000 });
}

export async function waitForEntry(env: TestEnv, runId: string, test: (entry: JournalEntry) => boolean, timeoutMs = 10_000): Promise<JournalEntry> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await journalOf(env, runId)).find(test);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no matching journal entry in run ${runId} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
