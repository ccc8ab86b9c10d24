import { join } from "node:path";
import type { AgentDefinition } from "../src/engine/agent.js";
import { browserFlowAgent, defaultBrowserTask } from "./browser-flow/agent.js";
import { codeAgent, defaultCodeTask } from "./code-agent/agent.js";
import { deepResearchAgent, defaultQuestion } from "./deep-research/agent.js";

export interface BundledAgentOptions {
  /** Where the examples keep what they make (drafts, the code workspace, form submissions). Default `.tether/examples`. */
  dataDir?: string;
  /** Streaming speed of their simulated model. Default 40 tokens per second, slow enough to watch. */
  tokensPerSecond?: number;
}

/** The three example agents, each with a real side effect that a cancel undoes. */
export function bundledAgents(options: BundledAgentOptions = {}): AgentDefinition[] {
  const dataDir = options.dataDir ?? join(process.cwd(), ".tether", "examples");
  const { tokensPerSecond } = options;
  return [
    deepResearchAgent({ dataDir: join(dataDir, "deep-research"), tokensPerSecond }),
    codeAgent({ workspace: join(dataDir, "code-agent", "workspace"), tokensPerSecond }),
    browserFlowAgent({ dataDir, tokensPerSecond }),
  ];
}

export { deepResearchAgent, defaultQuestion, type DeepResearchOptions } from "./deep-research/agent.js";
export { codeAgent, defaultCodeTask, type CodeAgentOptions } from "./code-agent/agent.js";
export { browserFlowAgent, defaultBrowserTask, formSiteFor, type BrowserFlowOptions } from "./browser-flow/agent.js";
export { FormSite, type Submission } from "./browser-flow/form-site.js";

/** A task each bundled agent can start with, by agent name (for `tether demo`). */
export const exampleTasks: Record<string, string> = {
  "deep-research": defaultQuestion,
  "code-agent": defaultCodeTask,
  "browser-flow": defaultBrowserTask,
};
