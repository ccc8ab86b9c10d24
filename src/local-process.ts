import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";
import type { LeaseHolder, ProcessProbe } from "./engine/lease-holder.js";

/**
 * The probe of this machine's processes that `createTether` and the CLI give the runtime: a lease
 * names its holder by host, pid and a nonce drawn once per process, and a process on the same
 * host (the same boot and pid namespace, on Linux) whose pid no longer exists is gone.
 */
export function localProcessProbe(): ProcessProbe {
  const self: LeaseHolder = { host: localHost(), pid: process.pid, nonce: processNonce() };
  return {
    self,
    gone(holder) {
      if (holder.host !== self.host) return false;
      // This process's own pid: the holder is this process, or an earlier one that had its pid.
      if (holder.pid === self.pid) return holder.nonce !== self.nonce;
      return !processExists(holder.pid);
    },
  };
}

function processExists(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists and belongs to someone else. Only ESRCH says it is gone.
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/**
 * Hostname, plus where Linux says them the boot id (pids restart with every boot) and the pid
 * namespace (containers on one kernel share the hostname only by choice, never the pids).
 */
function localHost(): string {
  const parts = [hostname()];
  try {
    parts.push(readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
    parts.push(readlinkSync("/proc/self/ns/pid"));
  } catch {
    // Not Linux: the hostname alone.
  }
  return parts.join("/");
}

/** One per process, shared by every copy of this module the process loads. */
function processNonce(): string {
  const key = Symbol.for("tether.processNonce");
  const global = globalThis as { [key]?: string };
  global[key] ??= randomBytes(6).toString("hex");
  return global[key];
}
