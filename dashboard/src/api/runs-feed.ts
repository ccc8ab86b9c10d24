import type { RunView } from "./types.js";

export interface ReceivedRun {
  run: RunView;
  /** Local time the view arrived, to tick `waitingForMs` forward without trusting clocks to agree. */
  receivedAt: number;
}

/** Every run the dashboard knows, kept current from `GET /runs` and the `/events` stream. */
export class RunsFeed {
  private readonly runs = new Map<string, ReceivedRun>();
  private readonly listeners = new Set<(changed: RunView | null) => void>();

  replace(list: readonly RunView[]): void {
    const now = Date.now();
    for (const run of list) {
      const known = this.runs.get(run.id);
      if (!known || known.run.version <= run.version) this.runs.set(run.id, { run, receivedAt: now });
    }
    this.emit(null);
  }

  upsert(run: RunView): void {
    const known = this.runs.get(run.id);
    if (known && known.run.version > run.version) return;
    this.runs.set(run.id, { run, receivedAt: Date.now() });
    this.emit(run);
  }

  get(id: string): ReceivedRun | undefined {
    return this.runs.get(id);
  }

  all(): RunView[] {
    return [...this.runs.values()].map((r) => r.run).sort((a, b) => b.createdAt - a.createdAt);
  }

  subscribe(listener: (changed: RunView | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(changed: RunView | null): void {
    for (const listener of this.listeners) listener(changed);
  }
}
