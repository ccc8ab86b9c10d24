import type { StoredState } from "./store.js";

/**
 * A snapshot a control command has just read and verified (a resume), handed to the executor
 * this process starts for the run next, so the run's state is read once, not twice. Taken only
 * if it is still the run's latest snapshot; a few at most are kept (a run claimed elsewhere
 * leaves its entry to be pushed out).
 */
export class SnapshotHandoff {
  private readonly entries = new Map<string, { stored: StoredState; chain: string }>();

  constructor(private readonly capacity = 4) {}

  /** `chain`: what `verifyStoredState` returned for it. */
  offer(runId: string, stored: StoredState, chain: string): void {
    this.entries.delete(runId);
    this.entries.set(runId, { stored, chain });
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  /** The offered snapshot if it is the one the run record names (`snapshotSeq`), once. */
  take(runId: string, snapshotSeq: number): { stored: StoredState; chain: string } | undefined {
    const entry = this.entries.get(runId);
    this.entries.delete(runId);
    return entry && entry.stored.head.seq === snapshotSeq ? entry : undefined;
  }
}
