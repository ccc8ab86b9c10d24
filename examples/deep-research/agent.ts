import { z } from "zod";
import type { AgentDefinition } from "../../src/engine/agent.js";
import type { Json } from "../../src/engine/json.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { SimulatedModel } from "../../src/models/simulated-model.js";
import { toolLatencyFor } from "../shared/delay.js";
import { exampleAsset } from "../shared/package-root.js";
import { Corpus } from "./corpus.js";
import { DraftStore } from "./drafts.js";
import { deepResearchScript } from "./script.js";
import { researchTools } from "./tools.js";

export interface DeepResearchOptions {
  /** Drafts go to `<dataDir>/drafts/<runId>.md`, published reports to `<dataDir>/published`. */
  dataDir: string;
  /** Streaming speed of the simulated model. Default 40, slow enough to watch. */
  tokensPerSecond?: number;
  /** The folder of documents to research. Default: the corpus shipped with the example. */
  corpusDir?: string;
}

export const defaultQuestion = "How should a long-running AI agent undo its side effects when it is cancelled?";

/** A question, or `{ question }` / `{ prompt }`. */
export const deepResearchInput = z.union([
  z.string().min(1),
  z.object({ question: z.string().min(1) }).strict(),
  z.object({ prompt: z.string().min(1) }).strict(),
]);

function questionOf(input: Json): string {
  if (typeof input === "string") return input;
  const object = input as { question?: string; prompt?: string };
  return String(object.question ?? object.prompt);
}

/**
 * Researches a question over a local corpus: search, fetch, write a cited report draft, publish.
 * Cancel undoes what it wrote: the publication is taken down and the draft marked `discarded`.
 */
export function deepResearchAgent(options: DeepResearchOptions): AgentDefinition {
  const tokensPerSecond = options.tokensPerSecond ?? 40;
  const corpus = new Corpus(options.corpusDir ?? exampleAsset("deep-research", "corpus"));
  const drafts = new DraftStore(options.dataDir);
  const base = toolLoopAgent({
    name: "deep-research",
    version: "1",
    description: "Researches a question over a local document corpus (search, fetch), writes a cited report draft and publishes it. Cancel discards the draft.",
    system:
      "You are a careful research assistant. Plan first, search the corpus, read the most relevant sources in full, " +
      "write a report draft that cites every claim, then publish it. Use only the tools you are given.",
    model: new SimulatedModel({ script: deepResearchScript, tokensPerSecond, modelId: "sim-1" }),
    tools: researchTools({ corpus, drafts, latencyMs: toolLatencyFor(tokensPerSecond, 200) }),
    maxTurns: 16,
    budgets: { maxSteps: 60, maxTokens: 80_000, maxCostUsd: 0.5, maxWallTimeMs: 15 * 60_000, maxRepeatedToolCalls: 3 },
    staleAfterMs: 24 * 60 * 60_000,
  });
  return {
    ...base,
    input: deepResearchInput as unknown as z.ZodType<Json>,
    init: (input) => base.init(questionOf(input)),
  };
}
