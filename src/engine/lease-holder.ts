import type { Lease } from "./store.js";

/** The longest lease a worker may take: a day (a dead worker's runs wait that long for another; a timer holds up to ~24.8 days). */
export const maxLeaseMs = 86_400_000;

/** The process behind a lease, as far as another process on the same machine can check it. */
export interface LeaseHolder {
  /**
   * The machine and its process namespace (hostname, boot id and pid namespace where the system
   * says them): pids mean something only between holders with the same `host`.
   */
  host: string;
  pid: number;
  /** Drawn once per process, so a later process that was given a dead one's pid is told apart. */
  nonce: string;
}

/**
 * How this process names itself in the leases it takes, and tells whether another holder's
 * process has exited. Passed in (`RuntimeOptions.processProbe`), so the engine reads no process
 * table itself; `createTether` and the CLI pass the local one.
 */
export interface ProcessProbe {
  readonly self: LeaseHolder;
  /**
   * True only when `holder` is known to be gone: a process on this host (same `host`) whose pid
   * no longer exists, or an earlier process that had this process's pid. Another host, or any
   * doubt, is false: that lease is left to run out.
   */
  gone(holder: LeaseHolder): boolean;
}

/** The lease is held by a process known to be gone: its run is orphaned now, whatever `until` says. */
export function heldByGoneProcess(probe: ProcessProbe | undefined, lease: Lease | null): boolean {
  return probe !== undefined && lease?.holder !== undefined && probe.gone(lease.holder);
}
