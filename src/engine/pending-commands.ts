import type { ControlCommandType } from "./status.js";
import type { RunUpdate, Store } from "./store.js";

export type CommandOutcomes = Partial<Record<ControlCommandType, string>>;

/**
 * Outcomes for a run's commands that were requested but not yet applied: the move they asked
 * for happened ("applied"), or a stronger one made them moot ("superseded: cancel"). Written
 * with that move, so no command stays pending once the run has moved on.
 */
export async function settlePendingCommands(store: Store, runId: string, outcomes: CommandOutcomes, at: number): Promise<NonNullable<RunUpdate["appliedCommands"]>> {
  const commands = await store.listCommands(runId);
  return commands.flatMap((c) => {
    const outcome = c.appliedAt === null ? outcomes[c.type] : undefined;
    return outcome === undefined ? [] : [{ id: c.id, appliedAt: at, outcome }];
  });
}
