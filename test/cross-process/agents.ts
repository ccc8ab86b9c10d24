import { appendFileSync } from "node:fs";
import { z } from "zod";
import { SimulatedModel, tool, toolLoopAgent, type AgentDefinition } from "../../src/index.js";

/** The agents of the cross-process suite: a slow-streaming model, so a pause lands mid-stream. */
export const streamingAgentName = "xp-streaming";
export const compensatingAgentName = "xp-compensating";

/** Tokens per second of the simulated model: a turn streams for a few hundred milliseconds. */
const tokensPerSecond = 100;

export function crossProcessAgents(compensationLogPath: string): AgentDefinition[] {
  const lookup = tool({
    name: "lookup",
    description: "Look something up",
    input: z.object({ query: z.string() }),
    execute: async ({ query }) => ({ hits: [`entry for ${query}`] }),
  });
  const publish = tool({
    name: "publish",
    description: "Publish a page",
    input: z.object({ title: z.string() }),
    execute: async ({ title }) => ({ published: title }),
    compensate: async (_input, result, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      appendFileSync(compensationLogPath, `${JSON.stringify({ key: ctx.idempotencyKey, pid: process.pid, result, at: Date.now() })}\n`);
    },
  });
  return [
    toolLoopAgent({
      name: streamingAgentName,
      tools: [lookup],
      model: new SimulatedModel({ seed: 5, tokensPerSecond, rounds: 8 }),
    }),
    toolLoopAgent({
      name: compensatingAgentName,
      tools: [publish],
      model: new SimulatedModel({ seed: 6, tokensPerSecond: 1000, rounds: 40 }),
      maxTurns: 100,
      budgets: { maxRepeatedToolCalls: 100 },
    }),
  ];
}
