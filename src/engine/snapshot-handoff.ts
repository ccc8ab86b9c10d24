import type { RunRecord, SnapshotWrite, StoredState } from "./store.js";

/**
 * A snapshot a control command has just read and verified (a resume), handed to the executor
 * this process starts for the run next, so the run's state is read once, not twice. Taken only
 * if it is still the run's latest snapshot; a few dozen at most are kept (a run claimed elsewhere
 * leaves its entry to be pushed out).
 */
export class SnapshotHandoff {
  private readonly entries = new Map<string, { stored: StoredState; chain: string }>();

  /**
   * A run's first snapshot is offered by the process that created it claimed and executes it at
   * once; a burst of starts offers many before their executors take them, so a few dozen are kept.
   */
  constructor(private readonly capacity = 64) {}

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

/**
 * A new run's first snapshot as the store would read it back (`loadState`): `write`, written by
 * `createRun` on the entries of `run`'s creation (the snapshot, with the vars, on the last).
 */
export function createdSnapshot(run: RunRecord, write: SnapshotWrite): StoredState {
  return {
    head: { ...write.head, seq: run.snapshotSeq, varsSeq: run.snapshotSeq, entrySeq: run.journalSeq },
    // A new run's snapshot always writes its vars (`SnapshotWriter.forNewRun`).
    varsJson: write.varsJson!,
    messages: write.appendMessages,
    verifiedChain: write.head.chain,
  };
}
