import type { AgentDefinition } from "./agent.js";
import type { RunRecord } from "./store.js";

/**
 * Runs are pinned to the version of the agent that started them: old state never runs through
 * new code unless the agent says the change is compatible (`compatibleWith`), or a person forks
 * the run onto the new version.
 */

/** Whether `version` matches `pattern`: equal, or equal up to the `x` (or `*`) parts (`1.x` matches `1`, `1.4`, `1.4.2`). */
export function versionMatches(pattern: string, version: string): boolean {
  if (pattern === version) return true;
  const want = pattern.split(".");
  const have = version.split(".");
  for (let i = 0; i < want.length; i++) {
    if (want[i] === "x" || want[i] === "X" || want[i] === "*") return true;
    if (want[i] !== have[i]) return false;
  }
  return want.length === have.length;
}

/** Whether this agent's code may continue a run started under `runVersion`. */
export function versionCompatible(agent: AgentDefinition, runVersion: string): boolean {
  return runVersion === agent.version || (agent.compatibleWith ?? []).some((pattern) => versionMatches(pattern, runVersion));
}

/** The status reason of a run paused because the code that would continue it has another version. */
export function versionMismatchReason(run: RunRecord, agent: AgentDefinition): string {
  return `version_mismatch: started by ${run.agent} version ${run.agentVersion}, this worker has version ${agent.version}; declare it compatible (compatibleWith) or fork the run onto version ${agent.version}`;
}
