import type { Action, Outcome } from "./agent.js";
import type { Json } from "./json.js";
import { idempotencyKey } from "./ids.js";
import type { InflightCall, JournalInput } from "./store.js";
import type { AnyTool, CheckResult } from "./tool.js";

export type RecoveryPlan =
  | { type: "abandon"; reason: string }
  | { type: "retry" }
  | { type: "apply"; outcome: Outcome; resolved?: (at: number) => JournalInput }
  | { type: "uncertain"; reason: string };

/**
 * What to do with a call that started but never completed (the worker died, or a person
 * decided on an uncertain call). Never a silent duplicate: only a model call, an `idempotent`
 * tool, or a tool whose `check` says it did not happen is issued again.
 */
export async function planRecovery(input: {
  runId: string;
  inflight: InflightCall;
  action: Action;
  tool: AnyTool | undefined;
  cancelling: boolean;
}): Promise<RecoveryPlan> {
  const { inflight, action, tool, cancelling } = input;
  if (inflight.kind === "model" || action.type !== "tool") return { type: "abandon", reason: "worker_lost" };

  const resolution = inflight.resolution;
  if (resolution) {
    const resolved = (at: number): JournalInput => ({
      type: "call.resolved",
      at,
      callSeq: inflight.callSeq,
      data: { decision: resolution.action, actor: resolution.actor },
    });
    if (resolution.action === "retry") return { type: "retry" };
    if (resolution.action === "skip") {
      return { type: "apply", outcome: { type: "tool", ok: false, error: "skipped", message: `call skipped by ${resolution.actor}` }, resolved };
    }
    return { type: "apply", outcome: { type: "tool", ok: true, output: resolution.result ?? null }, resolved };
  }
  if (inflight.uncertain) return { type: "uncertain", reason: "awaiting a person's decision" };
  if (!tool) return { type: "uncertain", reason: `the agent no longer declares tool ${inflight.name}` };

  if (tool.check) {
    const key = inflight.key ?? idempotencyKey(input.runId, inflight.callSeq);
    let checked: CheckResult<Json>;
    try {
      checked = await tool.check(key, action.input);
    } catch (error) {
      // No answer is not a "no": the call may have happened.
      return { type: "uncertain", reason: `check(${key}) failed: ${error instanceof Error ? error.message : String(error)}` };
    }
    if (checked.done) return { type: "apply", outcome: { type: "tool", ok: true, output: checked.result ?? null } };
    // It did not happen: safe to issue again, or (when cancelling) to drop.
    return cancelling ? { type: "abandon", reason: "check_not_done" } : { type: "retry" };
  }
  if (tool.idempotent) {
    // Retrying would only be to undo it again; a person decides what the world looks like.
    return cancelling ? { type: "uncertain", reason: "the worker stopped during the call and the run is being cancelled, so it is not retried" } : { type: "retry" };
  }
  return { type: "uncertain", reason: "the worker stopped during a call that is neither idempotent nor checkable" };
}
