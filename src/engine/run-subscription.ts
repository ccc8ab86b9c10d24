import type { EngineContext } from "./engine-context.js";
import { RunNotFoundError, WaitTimeoutError } from "./errors.js";
import type { RunEvent } from "./events.js";
import type { RunStatus } from "./status.js";
import type { RunRecord } from "./store.js";

/**
 * The run's events from `afterSeq`: the journal's history first, then live, with no gap and
 * no duplicate. The bus only carries this process's writes, so a gap in its sequence (another
 * process wrote) is filled from the store before anything after it is delivered; runs
 * executed by another process (`executingHere` false) are followed by polling the journal.
 */
export function subscribeRun(
  ctx: EngineContext,
  executingHere: (runId: string) => boolean,
  runId: string,
  options: { afterSeq?: number; pollMs?: number },
  listener: (event: RunEvent) => void,
): () => void {
  let last = options.afterSeq ?? 0;
  let closed = false;
  /** Held bus events, each with the number of store reads started before it arrived. */
  const pending: { event: RunEvent; readsBefore: number }[] = [];
  let readsStarted = 0;
  const deliver = (event: RunEvent) => {
    if (event.kind === "journal") {
      if (event.seq <= last) return;
      last = event.seq;
    } else if (event.seq < last) return;
    listener(event);
  };
  let reading = false;
  let readAgain = false;
  const catchUp = async (): Promise<void> => {
    if (closed) return;
    if (reading) {
      readAgain = true;
      return;
    }
    reading = true;
    try {
      do {
        readAgain = false;
        for (;;) {
          readsStarted += 1;
          const page = await ctx.store.readJournal(runId, { afterSeq: last, limit: 500 });
          for (const entry of page) if (!closed) deliver({ kind: "journal", runId, seq: entry.seq, entry });
          if (page.length < 500) break;
        }
      } while (readAgain && !closed);
    } catch {
      // The store is unreachable for now: the next poll or event retries.
      return;
    } finally {
      reading = false;
    }
    flush();
  };
  /**
   * Delivers held events in order. One ahead of the journal waits for a read of the store; once
   * a read that started after it arrived has found nothing in between, there is nothing to wait for.
   */
  const flush = () => {
    while (pending.length && !closed && !reading) {
      const { event, readsBefore } = pending[0];
      const ahead = event.kind === "journal" ? event.seq > last + 1 : event.seq > last;
      if (ahead && readsBefore === readsStarted) return void catchUp();
      pending.shift();
      deliver(event);
    }
  };
  const unsubscribe = ctx.bus.subscribe(runId, (event) => {
    pending.push({ event, readsBefore: readsStarted });
    flush();
  });
  void catchUp();
  const timer = setInterval(() => {
    if (!executingHere(runId)) void catchUp();
  }, options.pollMs ?? 100);
  timer.unref?.();
  return () => {
    closed = true;
    clearInterval(timer);
    unsubscribe();
  };
}

/**
 * Resolves with the run once `predicate` holds (checked on every event and every poll). A run
 * executed here is tested at each event on its executor's record (`executing`) when that record
 * holds every journal entry heard of (the executor's own writes publish theirs after taking the
 * record, and a record written elsewhere nudges the waiter once the executor took it); the store
 * is read at the start, at each poll, and when the executor's record is behind.
 */
export async function waitForRun(
  ctx: EngineContext,
  executing: (runId: string) => RunRecord | undefined,
  runId: string,
  predicate: ((run: RunRecord) => boolean) | readonly RunStatus[],
  options: { timeoutMs?: number },
): Promise<RunRecord> {
  const test = typeof predicate === "function" ? predicate : (run: RunRecord) => predicate.includes(run.status);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let wake: () => void = () => undefined;
  let woken = false;
  /** The last journal entry heard of: a record without it (written by a command here, not yet told to the executor) is not tested. */
  let heard = 0;
  // Only journal entries can change the run record; live text deltas never do.
  const unsubscribe = ctx.bus.subscribe(runId, (event) => {
    if (event.kind !== "journal") return;
    heard = Math.max(heard, event.seq);
    wake();
  });
  const unnudge = ctx.bus.onNudge(runId, () => wake());
  try {
    for (;;) {
      const latest = woken ? executing(runId) : undefined;
      const held = latest && latest.journalSeq >= heard ? latest : undefined;
      const run = held ?? (await ctx.store.getRun(runId));
      if (!run) throw new RunNotFoundError(runId);
      // The executor's record is its own: the caller gets a copy to keep.
      if (test(run)) return held ? structuredClone(run) : run;
      const left = deadline - Date.now();
      if (left <= 0) throw new WaitTimeoutError(runId, timeoutMs, run.status);
      // A run executed here changes only through this process's bus (its writes, or a nudge when
      // it takes a record written elsewhere): the store is read again only now and then. Any
      // other run is read every 20 ms.
      const pollMs = executing(runId) ? 250 : 20;
      woken = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), Math.min(left, pollMs));
        wake = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
    }
  } finally {
    unsubscribe();
    unnudge();
  }
}
