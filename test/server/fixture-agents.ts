import { appendFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import type { AgentDefinition } from "../../src/engine/agent.js";
import { SimulatedModel, type SimulatedScript } from "../../src/models/simulated-model.js";
import { tool } from "../../src/engine/tool.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { tool as aiTool } from "ai";
import { fromAiSdkTool } from "../../src/tools/ai-sdk-tool.js";
import { effectTool, Ledger, sequenceAgent } from "../../src/testing/index.js";

/**
 * Agents for the server and CLI suites: real tool loops on the simulated model, with an effect
 * that declares a compensation (and logs it), a slow tool that ignores its signal, and a
 * vars schema so patches can be refused.
 */
export interface FixtureOptions {
  /** Streaming speed of the simulated model. */
  tokensPerSecond?: number;
  /** Tool-calling turns before the final answer. */
  rounds?: number;
  /** Where compensations and tool executions are appended, one line each (for child processes). */
  logFile?: string;
  /** How long `slow_lookup` takes; it does not honour its signal. */
  slowMs?: number;
}

export interface FixtureLog {
  executed: string[];
  compensated: string[];
}

const filler = "The sources point to a consistent trend, and the draft needs one more check before it goes out.";

function writerScript(rounds: number): SimulatedScript {
  return ({ turn }) => {
    if (turn >= rounds) return { text: `Final answer after ${turn} turns. ${filler}` };
    if (turn % 2 === 0) return { text: `Turn ${turn}: publishing a draft. ${filler}`, toolCalls: [{ toolName: "publish_draft", input: { title: `draft ${turn}` } }] };
    return { text: `Turn ${turn}: looking something up. ${filler}`, toolCalls: [{ toolName: "lookup", input: { query: `question ${turn}` } }] };
  };
}

function slowScript(): SimulatedScript {
  return ({ turn }) => (turn === 0 ? { text: "Waiting on the slow lookup.", toolCalls: [{ toolName: "slow_lookup", input: { query: "slow" } }] } : { text: "Done." });
}

export function fixtureAgents(options: FixtureOptions = {}, log: FixtureLog = { executed: [], compensated: [] }): AgentDefinition[] {
  const record = (kind: "executed" | "compensated", line: string) => {
    log[kind].push(line);
    if (options.logFile) appendFileSync(options.logFile, `${kind} ${line}\n`);
  };
  const tps = options.tokensPerSecond ?? 400;
  const publishDraft = tool({
    name: "publish_draft",
    description: "Publish a draft; cancelling the run unpublishes it.",
    input: z.object({ title: z.string() }),
    execute: async ({ title }, ctx) => {
      record("executed", `publish_draft ${title} ${ctx.idempotencyKey}`);
      return { url: `https://drafts.example/${encodeURIComponent(title)}` };
    },
    compensate: async ({ title }) => {
      record("compensated", `publish_draft ${title}`);
    },
  });
  const lookup = tool({
    name: "lookup",
    description: "Look something up.",
    input: z.object({ query: z.string() }),
    idempotent: true,
    execute: async ({ query }) => ({ answer: `about ${query}` }),
  });
  const slowLookup = tool({
    name: "slow_lookup",
    description: "A lookup that takes a while and cannot be interrupted.",
    input: z.object({ query: z.string() }),
    execute: async ({ query }, ctx) => {
      record("executed", `slow_lookup ${query} ${ctx.idempotencyKey}`);
      await delay(options.slowMs ?? 600);
      return { answer: `slowly, about ${query}` };
    },
  });
  return [
    toolLoopAgent({
      name: "writer",
      description: "Publishes drafts and looks things up (fixture).",
      model: new SimulatedModel({ tokensPerSecond: tps, script: writerScript(options.rounds ?? 6) }),
      tools: [publishDraft, lookup],
      vars: z.looseObject({ topic: z.string().optional() }),
      maxTurns: 50,
    }),
    toolLoopAgent({
      name: "slow",
      description: "Waits on a tool that ignores its signal (fixture).",
      model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script: slowScript() }),
      tools: [slowLookup],
    }),
    toolLoopAgent({
      name: "stale",
      description: "Its snapshots go stale after a minute (fixture).",
      model: new SimulatedModel({ tokensPerSecond: tps, script: writerScript(options.rounds ?? 6) }),
      tools: [publishDraft, lookup],
      staleAfterMs: 60_000,
    }),
  ];
}

/**
 * A payer whose `send_payment` needs a person's approval (fixture, not in `fixtureAgents`): its
 * first turn asks for one payment, or two when the prompt says "two"; every payment sent is logged.
 */
export function approvalAgent(log: FixtureLog = { executed: [], compensated: [] }, options: { logFile?: string } = {}): AgentDefinition {
  const sendPayment = tool({
    name: "send_payment",
    description: "Send a payment; a person approves each first.",
    input: z.object({ to: z.string(), amount: z.number().positive() }),
    needsApproval: true,
    execute: async ({ to, amount }, ctx) => {
      const line = `send_payment ${to} ${amount} ${ctx.idempotencyKey}`;
      log.executed.push(line);
      if (options.logFile) appendFileSync(options.logFile, `executed ${line}\n`);
      return { sent: amount, to };
    },
  });
  return toolLoopAgent({
    name: "payer",
    description: "Sends payments a person approves (fixture).",
    model: new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn, request }) => {
        if (turn > 0) return { text: "The payments are handled." };
        const prompt = String(request.messages.find((m) => m.role === "user")?.content ?? "");
        const calls = [{ toolName: "send_payment", input: { to: "acme", amount: 120 } }];
        if (prompt.includes("two")) calls.push({ toolName: "send_payment", input: { to: "globex", amount: 80 } });
        return { text: "Sending the payment.", toolCalls: calls };
      },
    }),
    tools: [sendPayment],
  });
}

/**
 * The same payer with an AI SDK tool whose own `needsApproval` (a predicate on its arguments)
 * asks a person first: payments of 50 or more wait for approval.
 */
export function aiSdkApprovalAgent(options: { logFile?: string } = {}): AgentDefinition {
  const sendPayment = aiTool({
    description: "Send a payment; one of 50 or more is approved by a person first.",
    inputSchema: z.object({ to: z.string(), amount: z.number().positive() }),
    needsApproval: async ({ amount }: { to: string; amount: number }) => amount >= 50,
    execute: async ({ to, amount }: { to: string; amount: number }, { toolCallId }: { toolCallId: string }) => {
      if (options.logFile) appendFileSync(options.logFile, `executed send_payment ${to} ${amount} ${toolCallId}\n`);
      return { sent: amount, to };
    },
  });
  return toolLoopAgent({
    name: "ai-payer",
    description: "Sends payments through an AI SDK tool with needsApproval (fixture).",
    model: new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ turn, request }) => {
        if (turn > 0) {
          const results = request.messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
          return { text: `Done: ${results.join(" | ")}` };
        }
        return {
          text: "Sending the payments.",
          toolCalls: [
            { toolName: "send_payment", input: { to: "acme", amount: 120 } },
            { toolName: "send_payment", input: { to: "globex", amount: 80 } },
          ],
        };
      },
    }),
    tools: [fromAiSdkTool("send_payment", sendPayment)],
  });
}

/**
 * Three compensable `work` effects (calls 1-3 at steps 1-3), then a `publish` that waits for a
 * person's approval: the run, and every fork of it, stays paused (live) with its effects done.
 */
export function forkyAgent(ledger: Ledger): AgentDefinition {
  const publish = tool({ name: "publish", description: "Publish", input: z.object({ id: z.string() }), needsApproval: true, execute: ({ id }) => ({ published: id }) });
  return sequenceAgent({
    name: "forky",
    tools: [effectTool({ name: "work", ledger, compensable: true }), publish],
    steps: [
      { tool: "work", input: { id: "a" } },
      { tool: "work", input: { id: "b" } },
      { tool: "work", input: { id: "c" } },
      { tool: "publish", input: { id: "d" } },
    ],
  });
}
