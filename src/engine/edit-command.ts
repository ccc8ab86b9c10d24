import type { AgentDefinition } from "./agent.js";
import { getRun, type ControlHost } from "./control-command.js";
import { IllegalTransitionError, RunHaltedError, TetherError } from "./errors.js";
import type { Json } from "./json.js";
import { restoreState } from "./snapshot.js";
import type { AgentState } from "./state.js";
import { applyStatePatch, validateMessage } from "./state-edits.js";
import { sendMessage } from "./steering.js";
import type { JournalInput, RunRecord, SteeringMessage } from "./store.js";

/** A person's edits of a run's state (a patch of its vars, a message), with the journal entries that record them. */
export function editState(
  agent: AgentDefinition | undefined,
  state: AgentState,
  actor: string,
  edits: { message?: string; patch?: unknown },
  now: number,
): { state: AgentState; journal: JournalInput[] } {
  const journal: JournalInput[] = [];
  let next = state;
  if (edits.patch !== undefined) {
    const vars = applyStatePatch(agent, next, edits.patch);
    next = { messages: next.messages, vars };
    journal.push({ type: "state.patched", at: now, data: { actor, patch: edits.patch as Json } });
  }
  if (edits.message !== undefined) {
    const content = validateMessage(edits.message);
    next = { messages: [...next.messages, { role: "user", content, author: actor }], vars: next.vars };
    journal.push({ type: "state.message_added", at: now, data: { actor, content, index: next.messages.length - 1 } });
  }
  return { state: next, journal };
}

/** Adds a message or applies a state patch to a paused run, without resuming it. */
export async function editPausedRun(host: ControlHost, runId: string, edits: { message?: string; patch?: unknown; actor?: string }): Promise<RunRecord> {
  const ctx = host.ctx;
  const actor = edits.actor ?? "local";
  for (let attempt = 0; ; attempt++) {
    if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while its state was being edited`);
    const run = await getRun(ctx, runId);
    // A halted run answers every command the same way: `halted`, lift the halt first.
    if (run.status === "halted") throw new RunHaltedError(runId, "edit the state of");
    if (run.status !== "paused") throw new IllegalTransitionError(runId, "edit the state of", run.status);
    const now = ctx.clock.now();
    const { state, writer } = restoreState(runId, await ctx.store.loadState(runId));
    const result = editState(ctx.agents.get(run.agent), state, actor, edits, now);
    if (!result.journal.length) return run;
    const update = await ctx.store.update({
      runId,
      expect: { version: run.version, status: ["paused"] },
      journal: result.journal,
      snapshot: writer.prepare(result.state, run.step, now),
    });
    if (update.ok) {
      ctx.bus.publishJournal(update.journal);
      return update.run;
    }
  }
}

/** `say`: a message to a run without pausing it (steering.ts), told at once to this process's executor of the run. */
export async function sayToRun(host: ControlHost, runId: string, text: string, actor: string): Promise<{ run: RunRecord; message: SteeringMessage }> {
  const sent = await sendMessage(host.ctx, runId, text, actor);
  // A run executing here hears of it at once; another process's through its control poll.
  host.executorOf(runId)?.observe(sent.run);
  return sent;
}
