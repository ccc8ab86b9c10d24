import { readdirSync, readFileSync } from "node:fs";

/**
 * A process group: a command spawned `detached` leads its own group, and everything it starts
 * belongs to it unless it leaves on purpose (`setsid`). Signalling `-pgid` reaches them all.
 */

/** Sends `signal` to every process of the group; false when the group is already empty. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw error;
  }
}

/**
 * Whether any process of the group is still alive. A member whose parent died is handed to
 * PID 1, and where PID 1 does not reap (a container without an init) it stays a zombie: dead,
 * but still answering signal 0. On Linux the process table tells the two apart.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ESRCH") return false;
    if (code !== "EPERM") throw error;
  }
  if (process.platform !== "linux") return true;
  return liveGroupMembers(pgid).length > 0;
}

/** Linux: the pids of the group's members that are not zombies, from `/proc`. */
export function liveGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return members;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // it exited while we looked
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so read after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") members.push(Number(entry));
  }
  return members;
}

/** Resolves true once the group is empty, or false if it still is not after `withinMs`. */
export async function groupGone(pgid: number, withinMs: number, everyMs = 20): Promise<boolean> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    if (!groupAlive(pgid)) return true;
    if (performance.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
