import type { EngineContext } from "./engine-context.js";
import { IllegalTransitionError, RunNotFoundError, TetherError } from "./errors.js";
import { validateMessage } from "./state-edits.js";
import { isTerminal } from "./status.js";
import type { RunRecord, SteeringMessage } from "./store.js";

/** The messages a person sent that the agent has not received yet. */
export function undeliveredSteering(run: RunRecord): SteeringMessage[] {
  return run.steering ? run.steering.messages.slice(run.steering.delivered) : [];
}

/**
 * Steering without stopping: a person's message to a run that is working (or paused, or waiting
 * for a worker). It is journaled at once (`message.queued`) and the agent receives it as a user
 * message at its next step boundary, before its next model call (`message.delivered`), with no
 * pause. The step machine delivers it (executor.ts, `deliverSteering`); an async-function agent
 * reads it with `ctx.messages()` (function-executor.ts).
 */
export async function sendMessage(ctx: EngineContext, runId: string, text: string, actor: string): Promise<{ run: RunRecord; message: SteeringMessage }> {
  const content = validateMessage(text);
  for (let attempt = 0; ; attempt++) {
    if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while a message was being queued for it`);
    const run = await ctx.store.getRun(runId);
    if (!run) throw new RunNotFoundError(runId);
    if (isTerminal(run.status)) throw new IllegalTransitionError(runId, "send a message to", run.status);
    const at = ctx.clock.now();
    const message: SteeringMessage = { id: ctx.ids("msg"), text: content, actor, at };
    const queue = run.steering ?? { messages: [], delivered: 0 };
    const result = await ctx.store.update({
      runId,
      expect: { version: run.version },
      set: { steering: { messages: [...queue.messages, message], delivered: queue.delivered } },
      journal: [{ type: "message.queued", at, data: { id: message.id, actor, text: content } }],
    });
    if (result.ok) {
      ctx.bus.publishJournal(result.journal);
      return { run: result.run, message };
    }
  }
}
