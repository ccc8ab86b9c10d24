import type { Context } from "hono";
import { streamSSE, type SSEMessage, type SSEStreamingApi } from "hono/streaming";
import type { RunEvent } from "../../engine/events.js";
import type { Runtime } from "../../engine/runtime.js";
import type { RunRecord } from "../../engine/store.js";
import type { DeltaData } from "../api-types.js";
import { runView } from "../run-view.js";
import type { Api, AppEnv, ServerContext } from "../server-context.js";
import { lastEventIdHeader, parseEventId, parseIntegerParam } from "../validation.js";

/** Writes in order from synchronous listeners, and keeps the connection alive with comments. */
class OrderedSse {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly stream: SSEStreamingApi) {}

  send(message: SSEMessage): void {
    this.queue = this.queue.then(() => this.stream.writeSSE(message)).catch(() => undefined);
  }

  comment(text: string): void {
    this.queue = this.queue.then(() => this.stream.write(`: ${text}\n\n`)).catch(() => undefined);
  }

  private ended: (() => void) | undefined;

  /** Resolves once the client goes away, or `end` ends the stream. */
  closed(): Promise<void> {
    return new Promise((resolve) => {
      this.ended = resolve;
      if (this.stream.aborted || this.stream.closed) resolve();
      else this.stream.onAbort(() => resolve());
    });
  }

  /** Ends the stream from the server's side, after what is queued. */
  end(): void {
    this.queue = this.queue.then(() => this.stream.close()).catch(() => undefined);
    this.ended?.();
  }
}

/**
 * A comment every heartbeat, so proxies keep the stream open; at each, the request's token is
 * checked again: a token revoked (or lowered below viewer) while its stream is open loses the
 * stream within a heartbeat, and a reconnection is refused. Returns the stop.
 */
function keepAlive(sse: OrderedSse, ctx: ServerContext, c: Context<AppEnv>): () => void {
  const timer = setInterval(() => {
    sse.comment("heartbeat");
    void ctx.stillAllowed(c, "viewer").then((allowed) => {
      if (!allowed) sse.end();
    });
  }, ctx.heartbeatMs);
  return () => clearInterval(timer);
}

function eventCursor(c: Context<AppEnv>): { seq: number; sub: number } {
  const header = lastEventIdHeader(c.req.header("last-event-id"));
  if (header !== undefined) return parseEventId(header, "the Last-Event-ID header");
  const after = c.req.query("after");
  if (after !== undefined && after !== "") return parseEventId(after, "the query parameter ?after");
  return { seq: 0, sub: 0 };
}

function toMessage(event: RunEvent): SSEMessage {
  if (event.kind === "journal") return { event: "journal", id: String(event.seq), data: JSON.stringify(event.entry) };
  const data: DeltaData = { callSeq: Number(event.data.callSeq), text: String(event.data.text ?? ""), offset: Number(event.data.offset ?? 0) };
  return { event: "delta", id: `${event.seq}.${event.sub}`, data: JSON.stringify(data) };
}

/** A view per changed run, found by polling the store (any process) and woken by this process's bus. */
class RunChangeFeed {
  /** Runs re-read this far back, so a write committed late by another process is not missed. */
  static readonly overlapMs = 1_000;
  /** Runs read at a time. */
  static readonly pageSize = 1_000;
  private cursor: number;
  private readonly seen = new Map<string, { version: number; updatedAt: number }>();
  private checking = false;
  private again = false;

  constructor(
    private readonly runtime: Runtime,
    since: number,
    private readonly emit: (run: RunRecord) => Promise<void>,
  ) {
    this.cursor = since;
  }

  async check(): Promise<void> {
    if (this.checking) {
      this.again = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.again = false;
        // Pages of the runs changed since, oldest change first (`listRuns` with `updatedAfter`),
        // each from the last one's time: however many changed, none is passed over. A full page
        // that is all one instant is read again, larger, rather than skipped.
        let after = this.cursor - RunChangeFeed.overlapMs;
        let limit = RunChangeFeed.pageSize;
        for (;;) {
          const runs = await this.runtime.store.listRuns({ updatedAfter: after, limit });
          for (const run of runs) {
            const previous = this.seen.get(run.id);
            if (previous && previous.version >= run.version) continue;
            this.seen.set(run.id, { version: run.version, updatedAt: run.updatedAt });
            await this.emit(run);
            this.cursor = Math.max(this.cursor, run.updatedAt);
          }
          if (runs.length < limit) break;
          const last = runs[runs.length - 1].updatedAt;
          if (last - 1 > after) {
            after = last - 1;
            limit = RunChangeFeed.pageSize;
          } else limit *= 2;
        }
        for (const [id, mark] of this.seen) if (mark.updatedAt < this.cursor - 2 * RunChangeFeed.overlapMs) this.seen.delete(id);
      } while (this.again);
    } catch {
      // The next poll tries again.
    } finally {
      this.checking = false;
    }
  }
}

/** Server-Sent Events: one run's journal and live model text, and the feed of run changes. */
export function eventRoutes(api: Api, ctx: ServerContext): void {
  const { runtime } = ctx;

  api.get("/runs/:id/events", ctx.guard("viewer"), async function runEvents(c) {
    const runId = c.req.param("id");
    const after = eventCursor(c);
    await runtime.get(runId);
    return streamSSE(c, async (stream) => {
      const sse = new OrderedSse(stream);
      sse.comment("connected");
      const unsubscribe = runtime.subscribe(runId, { afterSeq: after.seq }, (event) => {
        // Live parts after the entry the client last saw, but not the ones it already has.
        if (event.kind === "live" && event.seq === after.seq && event.sub <= after.sub) return;
        sse.send(toMessage(event));
      });
      const stopKeepAlive = keepAlive(sse, ctx, c);
      try {
        await sse.closed();
      } finally {
        stopKeepAlive();
        unsubscribe();
      }
    });
  });

  api.get("/events", ctx.guard("viewer"), async function runChanges(c) {
    const header = lastEventIdHeader(c.req.header("last-event-id"));
    const since =
      header !== undefined
        ? parseIntegerParam("the Last-Event-ID header", header, { min: 0, max: Number.MAX_SAFE_INTEGER })
        : parseIntegerParam("after", c.req.query("after"), { min: 0, max: Number.MAX_SAFE_INTEGER });
    return streamSSE(c, async (stream) => {
      const sse = new OrderedSse(stream);
      sse.comment("connected");
      const feed = new RunChangeFeed(runtime, since ?? runtime.clock.now(), async (run) => {
        sse.send({ event: "run", id: String(run.updatedAt), data: JSON.stringify(await runView(runtime, run)) });
      });
      const unsubscribe = runtime.bus.subscribeAll((event) => {
        if (event.kind === "journal") void feed.check();
      });
      const poll = setInterval(() => void feed.check(), 100);
      const stopKeepAlive = keepAlive(sse, ctx, c);
      void feed.check();
      try {
        await sse.closed();
      } finally {
        clearInterval(poll);
        stopKeepAlive();
        unsubscribe();
      }
    });
  });
}
