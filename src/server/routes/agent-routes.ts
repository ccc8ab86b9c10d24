import type { AgentDefinition } from "../../engine/agent.js";
import type { AgentInfo } from "../api-types.js";
import type { Api, ServerContext } from "../server-context.js";

export function agentInfo(agent: AgentDefinition): AgentInfo {
  return {
    name: agent.name,
    version: agent.version,
    description: agent.description ?? null,
    tools: (agent.tools ?? []).map((t) => ({
      name: t.name,
      description: t.description,
      compensates: typeof t.compensate === "function",
      idempotent: t.idempotent === true,
      abortable: t.abortable === true,
    })),
    resources: (agent.resources ?? []).map((r) => ({ name: r.name, releaseOnPause: r.releaseOnPause === true })),
  };
}

export function agentRoutes(api: Api, ctx: ServerContext): void {
  api.get("/agents", ctx.guard("viewer"), function listAgents(c) {
    return c.json({ agents: ctx.runtime.agents().map(agentInfo) });
  });
}
