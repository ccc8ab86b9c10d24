import { appendFileSync } from "node:fs";
import { z } from "zod";
import { defineAgent, tool, type AgentDefinition } from "../../src/index.js";

/**
 * The agents of the takeover suite: step 1 calls `hold`, step 2 calls `finish`, then done.
 * `hold` writes what it saw to the ledger (process, idempotency key) and, in the first process
 * (`block`), never returns: that process is SIGKILLed inside the call.
 */
export const idempotentAgentName = "takeover-idempotent";
export const chargeAgentName = "takeover-charge";

export interface LedgerRow {
  tool: string;
  pid: number;
  key: string;
}

export function takeoverAgents(ledgerPath: string, options: { block: boolean }): AgentDefinition[] {
  const note = (toolName: string, key: string) => appendFileSync(ledgerPath, `${JSON.stringify({ tool: toolName, pid: process.pid, key } satisfies LedgerRow)}\n`);
  const hold = (idempotent: boolean) =>
    tool({
      name: "hold",
      description: "Takes as long as it takes",
      input: z.object({ item: z.string() }),
      idempotent,
      execute: async ({ item }, ctx) => {
        note("hold", ctx.idempotencyKey);
        if (options.block) {
          await new Promise(() => undefined);
        }
        return { held: item };
      },
    });
  const finish = tool({
    name: "finish",
    description: "Writes the result",
    input: z.object({ item: z.string() }),
    execute: async ({ item }, ctx) => {
      note("finish", ctx.idempotencyKey);
      return { finished: item };
    },
  });
  const agent = (name: string, idempotent: boolean) =>
    defineAgent({
      name,
      version: "1",
      tools: [hold(idempotent), finish],
      init: () => ({ messages: [], vars: { step: 0 } }),
      next: (state) => {
        const step = Number(state.vars.step);
        if (step === 0) return { type: "tool", toolCallId: "c0", toolName: "hold", input: { item: "a" } };
        if (step === 1) return { type: "tool", toolCallId: "c1", toolName: "finish", input: { item: "a" } };
        return { type: "done", output: { steps: step } };
      },
      apply: (state) => void (state.vars = { step: Number(state.vars.step) + 1 }),
    });
  return [agent(idempotentAgentName, true), agent(chargeAgentName, false)];
}
