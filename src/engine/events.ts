import type { JsonObject } from "./json.js";
import type { JournalEntry } from "./store.js";

/**
 * A run's event stream: its journal entries (durable, numbered by `seq`), and between them
 * live-only parts such as model text deltas, numbered `seq.sub` after the entry they follow.
 * Reading from an offset replays the durable entries, then continues live.
 */
export type RunEvent =
  | { kind: "journal"; runId: string; seq: number; entry: JournalEntry }
  | { kind: "live"; runId: string; seq: number; sub: number; type: "model.delta"; at: number; data: JsonObject };

export function eventId(event: RunEvent): string {
  return event.kind === "journal" ? String(event.seq) : `${event.seq}.${event.sub}`;
}

type Listener = (event: RunEvent) => void;

/** In-process fan-out; cross-process readers poll the store's journal instead. */
export class EventBus {
  private readonly byRun = new Map<string, Set<Listener>>();
  private readonly all = new Set<Listener>();
  private readonly journalListeners = new Set<(entry: JournalEntry) => void>();
  private readonly nudgeListeners = new Map<string, Set<() => void>>();
  private readonly liveCounters = new Map<string, { seq: number; sub: number }>();

  subscribe(runId: string, listener: Listener): () => void {
    let set = this.byRun.get(runId);
    if (!set) this.byRun.set(runId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.byRun.delete(runId);
    };
  }

  subscribeAll(listener: Listener): () => void {
    this.all.add(listener);
    return () => this.all.delete(listener);
  }

  /**
   * Every run's journal entries written through this process (no live parts): for the process's
   * own bookkeeping (webhooks, tracing, approval deadlines). It holds no run's stream open.
   */
  subscribeJournal(listener: (entry: JournalEntry) => void): () => void {
    this.journalListeners.add(listener);
    return () => this.journalListeners.delete(listener);
  }

  publishJournal(entries: readonly JournalEntry[]): void {
    for (const entry of entries) {
      this.liveCounters.set(entry.runId, { seq: entry.seq, sub: 0 });
      this.emit({ kind: "journal", runId: entry.runId, seq: entry.seq, entry });
      for (const listener of this.journalListeners) {
        try {
          listener(entry);
        } catch {
          // A bookkeeping listener never breaks the writer.
        }
      }
    }
  }

  /** The run's journal reached `seq` (possibly written by another process): live parts are numbered after it. */
  advanceTo(runId: string, seq: number): void {
    if (seq > (this.liveCounters.get(runId)?.seq ?? 0)) this.liveCounters.set(runId, { seq, sub: 0 });
  }

  /** A model's text delta, live only; the clock is read only when someone follows the run. */
  /** `offset`: the characters of the call's text streamed before this delta (a follower that joins mid-call knows it missed the start). */
  publishDelta(runId: string, callSeq: number, text: string, clock: { now(): number }, offset = 0): void {
    let counter = this.liveCounters.get(runId);
    if (!counter) this.liveCounters.set(runId, (counter = { seq: 0, sub: 0 }));
    counter.sub += 1;
    // Most deltas have no follower: numbering them is all that is needed (a later follower's ids stay right).
    if (this.hasListeners(runId)) this.emit({ kind: "live", runId, seq: counter.seq, sub: counter.sub, type: "model.delta", at: clock.now(), data: { callSeq, text, offset } });
  }

  /**
   * The run's record changed without a journal entry through this process (an executor here took
   * a newer record written elsewhere): wakes `onNudge` listeners, such as `Runtime.waitFor`.
   */
  nudge(runId: string): void {
    for (const listener of this.nudgeListeners.get(runId) ?? []) listener();
  }

  onNudge(runId: string, listener: () => void): () => void {
    let set = this.nudgeListeners.get(runId);
    if (!set) this.nudgeListeners.set(runId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.nudgeListeners.delete(runId);
    };
  }

  /** Whether anyone follows this run's stream (a subscriber of the run, or of every run's events). */
  hasListeners(runId: string): boolean {
    return this.all.size > 0 || (this.byRun.get(runId)?.size ?? 0) > 0;
  }

  forget(runId: string): void {
    this.liveCounters.delete(runId);
  }

  private emit(event: RunEvent): void {
    for (const listener of this.byRun.get(event.runId) ?? []) listener(event);
    for (const listener of this.all) listener(event);
  }
}
