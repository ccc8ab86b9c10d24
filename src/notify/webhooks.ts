import type { Clock } from "../engine/clock.js";
import { InvalidInputError } from "../engine/errors.js";
import type { JsonObject } from "../engine/json.js";
import type { Runtime } from "../engine/runtime.js";
import type { JournalEntry, RunRecord } from "../engine/store.js";
import { findWaitStart, waitingForPerson, type PersonWait } from "../engine/waiting.js";
import { packageVersion } from "../server/package-info.js";
import { parseWebhooks, type Webhook, type WebhookConfig } from "./webhook-config.js";
import { runWaitingPayload } from "./webhook-payload.js";
import { signatureHeader, signWebhookBody } from "./webhook-signature.js";

export interface WebhookNotifierOptions {
  webhooks: readonly WebhookConfig[];
  /** The server's address as people reach it (`https://tether.example.com`): the links in each body start with it. */
  publicUrl: string;
  /** Default: the runtime's clock. Backoff waits go through its `sleep`. */
  clock?: Clock;
  /** Attempts per wait and webhook before giving up (until the next start of the notifier). Default 5. */
  maxAttempts?: number;
  /** The wait before the first retry, doubled for each next one (1, 2, 4, 8 s). Default 1000. */
  backoffMs?: number;
  /** Default 60 000. */
  maxBackoffMs?: number;
  /** How long one attempt may take before it counts as failed. Default 10 000. */
  timeoutMs?: number;
  /** Told of an error the notifier cannot journal (the store went away). Default: printed to stderr. */
  onError?(error: unknown): void;
}

export interface WebhookNotifier {
  /** Resolves once the runs that were already waiting at the start have been looked at. */
  readonly caughtUp: Promise<void>;
  /** Resolves once every delivery started so far has ended: delivered, given up, or stopped. */
  idle(): Promise<void>;
  /** Stops listening and sending; what was not delivered is delivered by the next start. */
  stop(): Promise<void>;
}

type DeliveryOutcome = "delivered" | "retrying" | "gave_up";

interface WaitStart {
  seq: number;
  at: number;
}

/**
 * Tells people that a run waits for them. Listens to the runtime's events in the process that
 * writes the pause (the worker): when a run pauses for a person (`waitingForPerson`), each
 * configured webhook gets one signed POST for that wait, retried with exponential backoff,
 * every attempt journaled as `webhook.delivery` on the run. An approval whose deadline passes
 * with `onApprovalTimeout: "wait"` begins a new wait, told again. On start it catches up: a run
 * already waiting whose journal shows no delivery to a webhook since its wait began gets one.
 */
export function startWebhookNotifier(runtime: Runtime, options: WebhookNotifierOptions): WebhookNotifier {
  const hooks = parseWebhooks(options.webhooks);
  const publicUrl = checkedPublicUrl(options.publicUrl);
  const clock = options.clock ?? runtime.clock;
  const store = runtime.store;
  const maxAttempts = Math.max(1, options.maxAttempts ?? 5);
  const backoffMs = options.backoffMs ?? 1_000;
  const maxBackoffMs = options.maxBackoffMs ?? 60_000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const onError = options.onError ?? ((error: unknown) => process.stderr.write(`tether webhooks: ${error instanceof Error ? error.message : String(error)}\n`));
  const userAgent = `tether-webhooks/${packageVersion()}`;
  const stopping = new AbortController();
  const jobs = new Set<Promise<void>>();
  /** Deliveries begun by this notifier, by run, wait and webhook: at most one each. */
  const begun = new Set<string>();

  const track = (job: Promise<void>) => {
    const tracked = job.catch(onError).finally(() => jobs.delete(tracked));
    jobs.add(tracked);
  };

  const backoff = (retry: number) => Math.min(maxBackoffMs, backoffMs * 2 ** (retry - 1));

  /** The run still waits on the wait that began at `seq`: paused for a person, no status change since. */
  async function stillWaiting(runId: string, seq: number): Promise<RunRecord | undefined> {
    const run = await store.getRun(runId);
    if (!run || run.status !== "paused" || !waitingForPerson(run)) return undefined;
    for (let after = seq; ; ) {
      const page = await store.readJournal(runId, { afterSeq: after, limit: 500 });
      if (page.some((e) => e.type === "status")) return undefined;
      if (page.length < 500) return run;
      after = page[page.length - 1].seq;
    }
  }

  async function journal(runId: string, data: JsonObject): Promise<void> {
    const result = await store.update({ runId, journal: [{ type: "webhook.delivery", at: clock.now(), data }] });
    if (result.ok) runtime.bus.publishJournal(result.journal);
  }

  async function post(hook: Webhook, body: string, deliveryId: string, attempt: number): Promise<{ ok: boolean; status?: number; error?: string }> {
    const timestamp = Math.floor(clock.now() / 1000);
    try {
      const response = await fetch(hook.url, {
        method: "POST",
        redirect: "manual",
        headers: {
          "content-type": "application/json",
          "user-agent": userAgent,
          [signatureHeader]: signWebhookBody(hook.secret, body, timestamp),
          "Tether-Event": "run.waiting",
          "Tether-Delivery": deliveryId,
          "Tether-Attempt": String(attempt),
        },
        body,
        signal: AbortSignal.any([stopping.signal, AbortSignal.timeout(timeoutMs)]),
      });
      await response.arrayBuffer().catch(() => undefined);
      return { ok: response.status >= 200 && response.status < 300, status: response.status };
    } catch (error) {
      return { ok: false, error: describeFailure(error, hook, timeoutMs) };
    }
  }

  /** Attempts one webhook for one wait until it is delivered, given up, the run moves on, or the notifier stops. */
  async function deliver(run: RunRecord, wait: PersonWait, start: WaitStart, hook: Webhook, attemptsBefore: number): Promise<void> {
    const payload = runWaitingPayload(run, wait, start, publicUrl);
    const body = JSON.stringify(payload);
    for (let i = 0; i < maxAttempts; i++) {
      if (i > 0) {
        try {
          await clock.sleep(backoff(i), stopping.signal);
        } catch {
          return; // stopped: the next start delivers
        }
        if (!(await stillWaiting(run.id, start.seq))) return;
      }
      const attempt = attemptsBefore + i + 1;
      const began = clock.now();
      const result = await post(hook, body, payload.id, attempt);
      if (stopping.signal.aborted) return;
      const outcome: DeliveryOutcome = result.ok ? "delivered" : i === maxAttempts - 1 ? "gave_up" : "retrying";
      await journal(run.id, {
        webhook: hook.id,
        target: hook.target,
        waitSeq: start.seq,
        reason: wait.reason,
        attempt,
        outcome,
        ...(result.status !== undefined ? { status: result.status } : {}),
        ...(result.error !== undefined ? { error: result.error } : {}),
        durationMs: clock.now() - began,
        ...(outcome === "retrying" ? { retryInMs: backoff(i + 1) } : {}),
      });
      if (result.ok) return;
    }
  }

  /** The run's wait that began at `start`: every webhook that wants its reason and has not been delivered yet gets it. */
  async function waitBegan(runId: string, start: WaitStart, history: Map<string, { attempts: number; delivered: boolean }>): Promise<void> {
    const run = await stillWaiting(runId, start.seq);
    const wait = run && waitingForPerson(run);
    if (!run || !wait) return;
    for (const hook of hooks) {
      const key = `${runId}:${start.seq}:${hook.id}`;
      const before = history.get(hook.id);
      if (!hook.wants(wait.reason) || before?.delivered || begun.has(key)) continue;
      begun.add(key);
      track(deliver(run, wait, start, hook, before?.attempts ?? 0));
    }
  }

  /** Runs that already wait: their wait's start, and what the journal says was delivered since. */
  async function catchUp(): Promise<void> {
    for (const run of await store.listRuns({ status: ["paused"], limit: 100_000 })) {
      if (stopping.signal.aborted) return;
      if (!waitingForPerson(run)) continue;
      const start = await findWaitStart(run, (afterSeq, limit) => store.readJournal(run.id, { afterSeq, limit }));
      if (!start) continue;
      track(waitBegan(run.id, { seq: start.seq, at: start.at }, await deliveriesSince(run.id, start.seq)));
    }
  }

  async function deliveriesSince(runId: string, seq: number): Promise<Map<string, { attempts: number; delivered: boolean }>> {
    const history = new Map<string, { attempts: number; delivered: boolean }>();
    for (let after = seq; ; ) {
      const page: JournalEntry[] = await store.readJournal(runId, { afterSeq: after, limit: 500 });
      for (const entry of page) {
        if (entry.type !== "webhook.delivery" || entry.data.waitSeq !== seq) continue;
        const id = String(entry.data.webhook);
        const seen = history.get(id) ?? { attempts: 0, delivered: false };
        history.set(id, { attempts: seen.attempts + 1, delivered: seen.delivered || entry.data.outcome === "delivered" });
      }
      if (page.length < 500) return history;
      after = page[page.length - 1].seq;
    }
  }

  const unsubscribe = runtime.bus.subscribeJournal((entry) => {
    if (stopping.signal.aborted) return;
    // An approval whose deadline passed with `onApprovalTimeout: "wait"` keeps waiting: people are told again.
    const waitsAgain = entry.type === "approval.expired" && entry.data.applied === "wait";
    if (!waitsAgain && (entry.type !== "status" || entry.data.to !== "paused")) return;
    track(waitBegan(entry.runId, { seq: entry.seq, at: entry.at }, new Map()));
  });

  const caughtUp = catchUp().catch(onError);
  track(caughtUp);

  return {
    caughtUp,
    async idle() {
      while (jobs.size) await Promise.allSettled([...jobs]);
    },
    async stop() {
      unsubscribe();
      stopping.abort(new Error("the webhook notifier stopped"));
      while (jobs.size) await Promise.allSettled([...jobs]);
    },
  };
}

function checkedPublicUrl(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new InvalidInputError(`publicUrl must be the http(s) address people open the dashboard at, e.g. https://tether.example.com (got ${JSON.stringify(value)})`);
  }
  return url.href.replace(/\/+$/, "");
}

/** Why an attempt failed, without the URL (it may hold a secret). */
function describeFailure(error: unknown, hook: Webhook, timeoutMs: number): string {
  if (error instanceof Error && error.name === "TimeoutError") return `no answer within ${timeoutMs} ms`;
  const cause = error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined;
  const text = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return text.split(hook.url).join(hook.target);
}
