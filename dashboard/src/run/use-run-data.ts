import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api/api-error.js";
import type { ReceivedRun } from "../api/runs-feed.js";
import type { DeltaData, JournalEntry, RunView, StateResponse } from "../api/types.js";
import { useEventStream, type StreamState } from "../api/use-event-stream.js";
import { useApp } from "../app-context.js";

export interface RunData {
  run: ReceivedRun | null;
  notFound: boolean;
  entries: JournalEntry[];
  /** Live model text by callSeq, as it streamed while this page was open ("…" first when the page joined a call mid-stream). */
  texts: ReadonlyMap<number, string>;
  state: StateResponse | null;
  stateError: string | null;
  stream: StreamState;
  setRun(run: RunView): void;
  refreshRun(): Promise<void>;
  refreshState(): Promise<void>;
}

const stateChanging = new Set(["call.completed", "call.failed", "state.message_added", "state.patched", "status"]);

/**
 * Everything the run page shows, kept live: the run view (from `GET /runs/:id`, the changes
 * feed, and re-read after each journal entry), the journal and model text from the run's event
 * stream, and the state (re-read when a step commits or it is edited).
 */
export function useRunData(id: string): RunData {
  const { client, feed } = useApp();
  const [run, setRunState] = useState<ReceivedRun | null>(() => feed.get(id) ?? null);
  const [notFound, setNotFound] = useState(false);
  const [entries, setEntries] = useState<JournalEntry[]>([]);
  const [texts, setTexts] = useState<ReadonlyMap<number, string>>(new Map());
  const [state, setState] = useState<StateResponse | null>(null);
  const [stateError, setStateError] = useState<string | null>(null);

  const pending = useRef<{ entries: JournalEntry[]; deltas: DeltaData[]; timer: number | undefined; seen: number }>({ entries: [], deltas: [], timer: undefined, seen: 0 });
  const runTimer = useRef<number | undefined>(undefined);
  const stateTimer = useRef<number | undefined>(undefined);

  const setRun = useCallback((view: RunView) => {
    setRunState((current) => (current && current.run.version > view.version ? current : { run: view, receivedAt: Date.now() }));
  }, []);

  const refreshRun = useCallback(async () => {
    try {
      setRun(await client.run(id));
      setNotFound(false);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) setNotFound(true);
    }
  }, [client, id, setRun]);

  const refreshState = useCallback(async () => {
    try {
      setState(await client.state(id));
      setStateError(null);
    } catch (error) {
      setStateError(error instanceof Error ? error.message : String(error));
    }
  }, [client, id]);

  const scheduleRun = useCallback(() => {
    window.clearTimeout(runTimer.current);
    runTimer.current = window.setTimeout(() => void refreshRun(), 80);
  }, [refreshRun]);

  const scheduleState = useCallback(() => {
    window.clearTimeout(stateTimer.current);
    stateTimer.current = window.setTimeout(() => void refreshState(), 250);
  }, [refreshState]);

  useEffect(() => {
    void refreshRun();
    void refreshState();
    const unsubscribe = feed.subscribe((changed) => {
      if (changed?.id === id) setRun(changed);
    });
    return () => {
      unsubscribe();
      window.clearTimeout(runTimer.current);
      window.clearTimeout(stateTimer.current);
      window.clearTimeout(pending.current.timer);
    };
  }, [feed, id, refreshRun, refreshState, setRun]);

  // Batched so a long journal replays in a few renders and fast deltas do not re-render per token.
  const flush = useCallback(() => {
    const batch = pending.current;
    batch.timer = undefined;
    const newEntries = batch.entries.splice(0);
    const newDeltas = batch.deltas.splice(0);
    if (newEntries.length) {
      setEntries((list) => [...list, ...newEntries]);
      scheduleRun();
      if (newEntries.some((e) => stateChanging.has(e.type))) scheduleState();
    }
    if (newDeltas.length) {
      setTexts((map) => {
        const next = new Map(map);
        // A call that was streaming when the page opened: its first characters went by before, marked "…".
        for (const delta of newDeltas) next.set(delta.callSeq, (next.get(delta.callSeq) ?? (delta.offset > 0 ? "…" : "")) + delta.text);
        return next;
      });
    }
  }, [scheduleRun, scheduleState]);

  const queue = useCallback(() => {
    if (pending.current.timer === undefined) pending.current.timer = window.setTimeout(flush, 40);
  }, [flush]);

  // A run that does not exist has no events: its page stops asking rather than retry every 2 s.
  const stream = useEventStream(
    notFound ? null : (lastId) => client.eventsRequest(`/runs/${encodeURIComponent(id)}/events${lastId ? `?after=${encodeURIComponent(lastId)}` : ""}`),
    {
      journal: (data) => {
        const entry = data as JournalEntry;
        if (entry.seq <= pending.current.seen) return;
        pending.current.seen = entry.seq;
        pending.current.entries.push(entry);
        queue();
      },
      delta: (data) => {
        pending.current.deltas.push(data as DeltaData);
        queue();
      },
    },
    { key: id },
  );

  return { run, notFound, entries, texts, state, stateError, stream, setRun, refreshRun, refreshState };
}
