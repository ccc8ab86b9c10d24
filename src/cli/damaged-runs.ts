import { TetherError } from "../engine/errors.js";
import type { DamagedRun } from "../engine/store.js";
import { info, type CliIo } from "./cli-context.js";

/**
 * After a listing: names each matching run whose record is damaged (on stderr, from its row's own
 * columns) and fails with `store_corrupt` (exit code 5), the other runs having been listed.
 */
export function throwIfDamaged(io: CliIo, damaged: readonly DamagedRun[]): void {
  if (damaged.length === 0) return;
  for (const run of damaged) info(io, `damaged: ${run.id}\t${run.agent}\t${run.status}\t${run.message}`);
  const named = damaged.map((run) => run.id).join(", ");
  throw new TetherError("store_corrupt", `${damaged.length} matching run${damaged.length === 1 ? "" : "s"} could not be read (a damaged record): ${named}; every other one is listed, and \`tether verify\` names the damage`);
}
