import { execFileSync } from "node:child_process";

export interface ProcessRow {
  pid: number;
  pgid: number;
  /** `ps` state letters: R, S, D, T, Z (zombie: dead, not yet reaped) and modifiers. */
  stat: string;
  args: string;
}

/**
 * The process table as `ps` prints it, zombies left out: what is really still running. For
 * tests that check a tool left no process behind.
 */
export function livingProcesses(filter: (row: ProcessRow) => boolean = () => true): ProcessRow[] {
  const text = execFileSync("ps", ["-eo", "pid=,pgid=,stat=,args="], { encoding: "utf8" });
  const rows: ProcessRow[] = [];
  for (const line of text.split("\n")) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const row = { pid: Number(match[1]), pgid: Number(match[2]), stat: match[3], args: match[4] };
    if (!row.stat.startsWith("Z") && filter(row)) rows.push(row);
  }
  return rows;
}
