import type { JournalInput, NewRun, RunRecord, RunUpdate } from "./store.js";
import { zeroUsage } from "./usage.js";

/** Helpers every store shares, so the meaning of an update is defined once. */
export function newRunRecord(run: NewRun): RunRecord {
  const { claim } = run;
  return {
    id: run.id,
    agent: run.agent,
    agentVersion: run.agentVersion,
    owner: run.owner,
    status: run.status,
    statusReason: null,
    input: run.input,
    output: null,
    error: null,
    model: run.model,
    step: run.step,
    nextCallSeq: 1,
    usage: { ...zeroUsage },
    budgets: run.budgets,
    activeMs: 0,
    runningSince: run.status === "running" ? run.createdAt : null,
    journalSeq: 0,
    snapshotSeq: 0,
    snapshotAt: run.createdAt,
    inflight: null,
    waitingFor: null,
    resources: {},
    guard: { lastToolSignature: null, repeats: 0 },
    report: null,
    forkedFrom: run.forkedFrom,
    pauseMode: null,
    // Created claimed: the lease a first claim takes (see `applyRunPatch`).
    lease: claim ? { workerId: claim.workerId, epoch: 1, until: claim.until, ...(claim.holder ? { holder: claim.holder } : {}) } : null,
    epoch: claim ? 1 : 0,
    version: 1,
    createdAt: run.createdAt,
    updatedAt: run.createdAt,
  };
}

export function expectationsHold(run: RunRecord, expect: RunUpdate["expect"]): boolean {
  if (!expect) return true;
  if (expect.status && !expect.status.includes(run.status)) return false;
  if (expect.epoch !== undefined && run.epoch !== expect.epoch) return false;
  if (expect.version !== undefined && run.version !== expect.version) return false;
  if (expect.leaseFree) {
    const { lease } = run;
    if (lease && lease.until >= expect.leaseFree.now && lease.workerId !== expect.leaseFree.workerId) return false;
  }
  return true;
}

/** The record after an update's `set` and `claim`; `updatedAt` follows the newest journal entry or snapshot. */
/**
 * The entries of a write in journal order of time too: none earlier than `floor` (the time of the
 * run's last write, `updatedAt`) nor than the entry before it. Writers compute an entry's time
 * before their write commits, so two of them (a person's pause and a step) could land 1 ms out
 * of order; an entry is dated no earlier than what the journal already holds. The same array
 * when nothing moves.
 */
export function inJournalOrder(floor: number, entries: JournalInput[]): JournalInput[] {
  let last = floor;
  let moved: JournalInput[] | undefined;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.at < last) (moved ??= entries.slice())[i] = { ...entry, at: last };
    else last = entry.at;
  }
  return moved ?? entries;
}

export function applyRunPatch(run: RunRecord, update: RunUpdate): RunRecord {
  const next: RunRecord = { ...run, ...update.set, version: run.version + 1 };
  if (update.claim) {
    next.epoch = run.epoch + 1;
    const { workerId, until, holder } = update.claim;
    next.lease = { workerId, epoch: next.epoch, until, ...(holder ? { holder } : {}) };
  }
  if (update.renewLease && next.lease && next.lease.workerId === update.renewLease.workerId && next.lease.epoch === next.epoch) {
    next.lease = { ...next.lease, until: Math.max(next.lease.until, update.renewLease.until) };
  }
  const times = [run.updatedAt];
  if (update.journal?.length) times.push(update.journal[update.journal.length - 1].at);
  if (update.snapshot) times.push(update.snapshot.head.at);
  next.updatedAt = Math.max(...times);
  return next;
}
