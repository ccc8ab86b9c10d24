import { createHash } from "node:crypto";
import { z } from "zod";
import { durableAgent, SimulatedModel, tool, toolLoopAgent, type AgentDefinition, type Json, type SimulatedScript } from "../../src/index.js";
import { hashString, seededRandom } from "../../src/models/seeded-random.js";
import { paragraph } from "../../src/models/simulated-text.js";
import type { Ledger } from "./ledger.js";

/**
 * The agents of the crash campaign. Their prompts carry a seed and say what to do, so a
 * crashed run and an uninterrupted run of the same prompt must end with the same output.
 */

export const crashAgentName = "crash-agent";
/** The same agent under a second name: the races and the soak halt this one's scope (`halt --agent`), while the first goes on. */
export const haltedAgentName = "crash-agent-haltable";

export interface AgentTimings {
  /** Streaming speed of the simulated model. */
  tokensPerSecond: number;
  /** How long one compensation takes; long enough for a kill to land inside it. */
  compensateMs: number;
  /** How long each tool call lasts, half before its ledger write and half after (default 8 to 12 ms by tool). */
  toolMs?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const words = ["alpha", "budget", "cache", "draft", "engine", "filter", "graph", "index", "latency", "market", "signal", "vector"];

export type PlannedCall = { toolName: "record_fact" | "append_log" | "publish_draft"; input: Json };

/** `campaign seed=7 steps=30` or `cancel seed=7 drafts=6 tail=40`. */
export function crashPrompt(kind: "campaign", seed: number, steps: number): string;
export function crashPrompt(kind: "cancel", seed: number, drafts: number, tail: number): string;
export function crashPrompt(kind: "campaign" | "cancel", seed: number, a: number, b?: number): string {
  return kind === "campaign" ? `campaign seed=${seed} steps=${a}` : `cancel seed=${seed} drafts=${a} tail=${b}`;
}

/** The tool calls a prompt asks for, in order; pure in the prompt. */
export function planFor(prompt: string): PlannedCall[] {
  const fields = new Map([...prompt.matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
  const random = seededRandom(hashString(prompt, fields.get("seed") ?? 0));
  const phrase = (i: number) => `${words[Math.floor(random() * words.length)]} ${words[Math.floor(random() * words.length)]} #${i}`;
  const plan: PlannedCall[] = [];
  if (prompt.startsWith("cancel")) {
    for (let i = 0; i < (fields.get("drafts") ?? 0); i++) plan.push({ toolName: "publish_draft", input: { title: phrase(i) } });
    for (let i = 0; i < (fields.get("tail") ?? 0); i++) plan.push({ toolName: "record_fact", input: { fact: phrase(i) } });
    return plan;
  }
  for (let i = 0; i < (fields.get("steps") ?? 0); i++) {
    const r = random();
    if (r < 0.4) plan.push({ toolName: "record_fact", input: { fact: phrase(i) } });
    else if (r < 0.7) plan.push({ toolName: "append_log", input: { line: phrase(i) } });
    else plan.push({ toolName: "publish_draft", input: { title: phrase(i) } });
  }
  return plan;
}

/** Follows the prompt's plan one tool call per turn, then answers with a digest of every tool result. */
const planScript: SimulatedScript = ({ request, turn, random }) => {
  const first = request.messages.find((m) => m.role === "user");
  const plan = planFor(typeof first?.content === "string" ? first.content : "");
  if (turn < plan.length) return { text: paragraph(random, 2), toolCalls: [plan[turn]] };
  const results = request.messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
  const digest = createHash("sha256").update(results.join("\n")).digest("hex").slice(0, 16);
  return { text: `Final answer from ${results.length} tool results (digest ${digest}). ${paragraph(random, 1)}` };
};

const half = (timings: AgentTimings, defaultMs: number) => (timings.toolMs === undefined ? defaultMs : timings.toolMs / 2);

function effectKeyOf(compensationKey: string): string {
  return compensationKey.replace(/:compensate$/, "");
}

/** The crash campaign's tools: an idempotent write, a non-idempotent append, a checkable and compensable publish. */
function crashTools(ledger: Ledger, timings: AgentTimings) {
  const recordFact = tool({
    name: "record_fact",
    description: "Record a fact in the ledger (idempotent by key)",
    input: z.object({ fact: z.string() }),
    idempotent: true,
    execute: async ({ fact }, ctx) => {
      await sleep(half(timings, 4));
      const result = ledger.putIdempotent(ctx.idempotencyKey, ctx.runId, fact, { recorded: fact, length: fact.length });
      await sleep(half(timings, 4));
      return result;
    },
  });
  const appendLog = tool({
    name: "append_log",
    description: "Append a line to the ledger (not idempotent, no check)",
    input: z.object({ line: z.string() }),
    execute: async ({ line }, ctx) => {
      await sleep(half(timings, 6));
      const result = { appended: line, length: line.length };
      ledger.append(ctx.idempotencyKey, ctx.runId, line, result);
      await sleep(half(timings, 6));
      return result;
    },
  });
  const publishDraft = tool({
    name: "publish_draft",
    description: "Publish a draft (compensable: cancel discards it)",
    input: z.object({ title: z.string() }),
    execute: async ({ title }, ctx) => {
      await sleep(half(timings, 4));
      const result = { published: title, words: title.split(" ").length };
      ledger.publishDraft(ctx.idempotencyKey, ctx.runId, title, result);
      await sleep(half(timings, 4));
      return result;
    },
    check: (key) => {
      const found = ledger.findDraft(key);
      return found === undefined ? { done: false } : { done: true, result: found as { published: string; words: number } };
    },
    compensate: async (_input, _result, ctx) => {
      await sleep(timings.compensateMs / 2);
      ledger.compensate(ctx.idempotencyKey, effectKeyOf(ctx.idempotencyKey), ctx.runId, Date.now());
      await sleep(timings.compensateMs / 2);
    },
  });
  return [recordFact, appendLog, publishDraft];
}

export function crashAgent(ledger: Ledger, timings: AgentTimings, name = crashAgentName): AgentDefinition {
  return toolLoopAgent({
    name,
    tools: crashTools(ledger, timings),
    model: new SimulatedModel({ seed: 11, tokensPerSecond: timings.tokensPerSecond, script: planScript }),
    maxTurns: 10_000,
    budgets: { maxSteps: 10_000 },
  });
}

export const crashParallelLoopAgentName = "crash-parallel-loop";

/** The plan three tool calls a turn; the answer digests every result in the order the model asked for them (the order the loop shows them). */
const batchedPlanScript: SimulatedScript = ({ request, turn, random }) => {
  const first = request.messages.find((m) => m.role === "user");
  const plan = planFor(typeof first?.content === "string" ? first.content : "");
  if (turn * 3 < plan.length) return { text: paragraph(random, 2), toolCalls: plan.slice(turn * 3, turn * 3 + 3) };
  const results = request.messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
  const digest = createHash("sha256").update(results.join("\n")).digest("hex").slice(0, 16);
  return { text: `Final answer from ${results.length} tool results (digest ${digest}). ${paragraph(random, 1)}` };
};

/**
 * The tool loop with three tool calls a turn, run at once (`parallelToolCalls`, the default):
 * kills land with several calls in flight, and a crashed run must end as an uninterrupted one.
 */
export function crashParallelLoopAgent(ledger: Ledger, timings: AgentTimings): AgentDefinition {
  return toolLoopAgent({
    name: crashParallelLoopAgentName,
    tools: crashTools(ledger, timings),
    // Quick model turns: the kills land mostly among the tool calls, several of them in flight together.
    model: new SimulatedModel({ seed: 11, tokensPerSecond: timings.tokensPerSecond * 10, script: batchedPlanScript }),
    maxTurns: 10_000,
    budgets: { maxSteps: 10_000 },
  });
}

export const crashFunctionAgentName = "crash-function-agent";

/**
 * The same plan as an async-function agent: a model call, then the next three planned tool calls
 * at once (`Promise.all`), until the plan is done; the output digests every tool result in
 * program order, so a crashed run and an uninterrupted one must agree.
 */
export function crashFunctionAgent(ledger: Ledger, timings: AgentTimings): AgentDefinition {
  const tools = crashTools(ledger, timings);
  return durableAgent({
    name: crashFunctionAgentName,
    tools,
    // Quick model turns: the kills land mostly among the tool calls, several of them in flight together.
    model: new SimulatedModel({ seed: 11, tokensPerSecond: timings.tokensPerSecond * 10, script: ({ random }) => ({ text: paragraph(random, 1) }) }),
    budgets: { maxSteps: 10_000 },
    run: async (ctx, input) => {
      const plan = planFor(String(input));
      const results: Json[] = [];
      for (let i = 0; i < plan.length; i += 3) {
        await ctx.model(`batch ${i / 3}`);
        const batch = plan.slice(i, i + 3);
        results.push(...(await Promise.all(batch.map((call) => ctx.tool(call.toolName, call.input)))));
      }
      const digest = createHash("sha256").update(results.map((r) => JSON.stringify(r)).join("\n")).digest("hex").slice(0, 16);
      return `Final answer from ${results.length} tool results (digest ${digest}).`;
    },
  });
}
