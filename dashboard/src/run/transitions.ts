import { commandTransitions } from "../../../src/engine/status.js";
import type { RunStatus } from "../api/types.js";

/** Which control commands can change a run in this status (the lifecycle table of docs/lifecycle.md). */
export function canApply(command: "pause" | "resume" | "cancel", status: RunStatus): boolean {
  return commandTransitions[command].from.includes(status);
}
