export const runStatuses = [
  "queued",
  "running",
  "pausing",
  "paused",
  "cancelling",
  "cancelled",
  "completed",
  "failed",
  "halted",
] as const;

export type RunStatus = (typeof runStatuses)[number];

export const terminalStatuses: ReadonlySet<RunStatus> = new Set(["completed", "failed", "cancelled"]);

export function isTerminal(status: RunStatus): boolean {
  return terminalStatuses.has(status);
}

export type ControlCommandType = "pause" | "resume" | "cancel" | "halt" | "unhalt" | "approve" | "reject";

/** What each control command may start from, and the status it moves to (docs/lifecycle.md). */
export const commandTransitions: Record<ControlCommandType, { from: readonly RunStatus[]; holds: readonly RunStatus[] }> = {
  pause: { from: ["running"], holds: ["pausing", "paused"] },
  resume: { from: ["paused"], holds: ["running", "queued"] },
  cancel: { from: ["queued", "running", "pausing", "paused", "halted"], holds: ["cancelling", "cancelled"] },
  halt: { from: ["queued", "running", "pausing", "paused", "cancelling"], holds: ["halted"] },
  unhalt: { from: ["halted"], holds: [] },
  // A decision on a call waiting for approval: the run waits paused (or is still pausing for it).
  approve: { from: ["pausing", "paused", "halted"], holds: [] },
  reject: { from: ["pausing", "paused", "halted"], holds: [] },
};

/** Every edge of the lifecycle, for the executor's own moves and for assertions in tests. */
export const legalEdges: Record<RunStatus, readonly RunStatus[]> = {
  queued: ["running", "cancelling", "halted"],
  running: ["pausing", "completed", "failed", "cancelling", "halted"],
  pausing: ["paused", "cancelling", "halted", "failed"],
  paused: ["running", "cancelling", "halted"],
  cancelling: ["cancelled", "halted"],
  halted: ["paused", "cancelling"],
  cancelled: [],
  completed: [],
  failed: [],
};

export function isLegalEdge(from: RunStatus, to: RunStatus): boolean {
  return legalEdges[from].includes(to);
}
