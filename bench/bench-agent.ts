/** The pieces both benchmarks share: a ~1 KB-per-step agent on an instant model, and the loop with no runtime. */
import {
  defineAgent,
  type Action,
  type StepAgentDefinition,
  type AgentState,
  type ModelResult,
  type ModelStreamPart,
  type Outcome,
  type Runtime,
  type TetherModel,
} from "../src/index.js";
import { seededRandom } from "../src/models/seeded-random.js";

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
export const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

/** ~1 KB of prose per step, precomputed so the model costs the same at every step. */
const texts = (() => {
  const random = seededRandom(1);
  const words = ["agent", "budget", "cache", "durable", "effect", "journal", "lease", "model", "pause", "resume", "snapshot", "step", "tool", "worker"];
  return Array.from({ length: 64 }, () => {
    let text = "";
    while (text.length < 1000) text += `${words[Math.floor(random() * words.length)]} `;
    return text.slice(0, 1000);
  });
})();

/** An instant model: one ~1 KB text delta per call, with usage reported. */
export const instantModel: TetherModel = {
  specificationVersion: "tether-model-v1",
  provider: "bench",
  modelId: "instant-1k",
  async *stream(request): AsyncGenerator<ModelStreamPart> {
    yield { type: "usage", usage: { inputTokens: 250, outputTokens: 0 } };
    yield { type: "text-delta", text: texts[request.messages.length % texts.length] };
    yield { type: "finish", finishReason: "stop", usage: { inputTokens: 250, outputTokens: 250 } };
  },
};

/** One model call per step; each step appends its ~1 KB answer to the messages. */
export function benchAgent(name: string, model: TetherModel, steps: number): StepAgentDefinition {
  return defineAgent({
    name,
    version: "1",
    model,
    budgets: { maxSteps: steps + 10 },
    init: () => ({ messages: [{ role: "user", content: "Write one paragraph per step." }], vars: { done: 0 } }),
    next: (state): Action =>
      Number(state.vars.done) >= steps ? { type: "done", output: Number(state.vars.done) } : { type: "model", request: { messages: state.messages, tools: [] } },
    apply: (state: AgentState, _action: Action, outcome: Outcome) => {
      if (outcome.type !== "model") return;
      state.messages.push({ role: "assistant", content: outcome.result.text });
      state.vars = { ...state.vars, done: Number(state.vars.done) + 1 };
      return { recordedInMessage: state.messages.length - 1 };
    },
  });
}

/** The same agent and model with no runtime and no store: next → stream → apply. */
export async function baselineLoop(agent: StepAgentDefinition, model: TetherModel): Promise<number> {
  const began = performance.now();
  const state = agent.init("bench");
  const signal = new AbortController().signal;
  for (let step = 0; ; step++) {
    const action = agent.next(state);
    if (action.type === "done") break;
    if (action.type !== "model") throw new Error("the bench agent only calls the model");
    let text = "";
    let finishReason = "unknown";
    let usage = { inputTokens: 0, outputTokens: 0 };
    for await (const part of model.stream(action.request, { signal, idempotencyKey: `baseline:${step}` })) {
      if (part.type === "text-delta") text += part.text;
      else if (part.type === "finish") {
        finishReason = part.finishReason;
        usage = part.usage ?? usage;
      }
    }
    const result: ModelResult = { text, toolCalls: [], finishReason, usage };
    agent.apply(state, action, { type: "model", result });
  }
  return performance.now() - began;
}

export async function runDurable(runtime: Runtime, agentName: string): Promise<{ runId: string; ms: number }> {
  let resolveDone!: (at: number) => void;
  const done = new Promise<number>((resolve) => (resolveDone = resolve));
  const off = runtime.bus.subscribeAll((event) => {
    if (event.kind === "journal" && event.entry.type === "status" && ["completed", "failed", "paused"].includes(String(event.entry.data.to))) resolveDone(performance.now());
  });
  const began = performance.now();
  const run = await runtime.start(agentName, "bench");
  const ended = await done;
  off();
  const final = await runtime.get(run.id);
  if (final.status !== "completed") throw new Error(`bench run ended ${final.status}: ${final.statusReason} ${JSON.stringify(final.error)}`);
  return { runId: run.id, ms: ended - began };
}

