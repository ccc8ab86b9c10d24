import { z } from "zod";
import { SimulatedModel, tool, toolLoopAgent, type AgentDefinition } from "../src/index.js";

/**
 * The agent of the load and scale benchmarks: a tool loop on the simulated model at 100 tokens/s
 * (or `tokensPerSecond`) with a 50 ms abortable lookup tool; `rounds` tool rounds make about 2·rounds + 1 steps. With
 * `needsApproval`, each run pauses for a person's approval at its first lookup.
 */
export function loaderAgent(rounds: number, options: { needsApproval?: boolean; tokensPerSecond?: number } = {}): AgentDefinition {
  const sleep = (ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
    });
  const lookup = tool({
    name: "lookup",
    description: "Look something up",
    input: z.object({ query: z.string() }),
    abortable: true,
    idempotent: true,
    ...(options.needsApproval ? { needsApproval: true } : {}),
    execute: async ({ query }, ctx) => (await sleep(50, ctx.signal), { query, found: 3 }),
  });
  return toolLoopAgent({ name: "loader", tools: [lookup], model: new SimulatedModel({ tokensPerSecond: options.tokensPerSecond ?? 100, rounds }), budgets: { maxSteps: 1000 } });
}
