import { isFunctionAgent, type AgentDefinition } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import { RunExecutor } from "./executor.js";
import { FunctionExecutor } from "./function-executor.js";
import type { ResourceHolder } from "./resources.js";
import type { RunSession } from "./run-session.js";
import type { RunRecord } from "./store.js";

/** The executor for a claimed run: the step machine's, or an async function's. */
export function createExecutor(ctx: EngineContext, agent: AgentDefinition, claimed: RunRecord, resources?: ResourceHolder): RunSession {
  return isFunctionAgent(agent) ? new FunctionExecutor(ctx, agent, claimed, resources) : new RunExecutor(ctx, agent, claimed, resources);
}
