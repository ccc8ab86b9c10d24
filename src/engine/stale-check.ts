import type { AgentDefinition } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import type { AgentState } from "./state.js";
import type { RunRecord } from "./store.js";

/**
 * Why a paused run's snapshot may no longer match the world: its age past `staleAfterMs`, effects
 * whose tool's `revalidate` says they drifted, held resources that drifted. Empty when nothing did
 * (or the agent is not known here).
 */
export async function staleReasons(ctx: EngineContext, run: RunRecord, agent: AgentDefinition | undefined, now: number): Promise<string[]> {
  const reasons: string[] = [];
  if (!agent) return reasons;
  if (agent.staleAfterMs !== undefined && now - run.snapshotAt > agent.staleAfterMs) {
    reasons.push(`the snapshot is ${Math.round((now - run.snapshotAt) / 1000)} s old (stale after ${Math.round(agent.staleAfterMs / 1000)} s)`);
  }
  const tools = new Map((agent.tools ?? []).map((t) => [t.name, t]));
  for (const effect of await ctx.store.listEffects(run.id)) {
    const tool = tools.get(effect.tool);
    if (effect.state !== "done" || !tool?.revalidate) continue;
    const verdict = await tool.revalidate(effect.input, effect.result);
    if (verdict !== true) reasons.push(`effect ${effect.tool} (call ${effect.callSeq}) drifted: ${verdict}`);
  }
  for (const definition of agent.resources ?? []) {
    const held = run.resources[definition.name];
    if (!held || !definition.revalidate) continue;
    const verdict = await definition.revalidate(held.record);
    if (verdict !== true) reasons.push(`resource ${definition.name} drifted: ${verdict}`);
  }
  return reasons;
}

/** What an `onStale` refresh changed, for its journal entry: the vars it changed, and messages added or removed. */
export function describeRefresh(before: AgentState, after: AgentState): { vars: string[]; messages: number } {
  const keys = new Set([...Object.keys(before.vars ?? {}), ...Object.keys(after.vars ?? {})]);
  const vars = [...keys].filter((key) => JSON.stringify((before.vars as Record<string, unknown>)[key]) !== JSON.stringify((after.vars as Record<string, unknown>)[key])).sort();
  return { vars, messages: after.messages.length - before.messages.length };
}
