import { join } from "node:path";
import type { AgentDefinition } from "../../src/engine/agent.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { SimulatedModel } from "../../src/models/simulated-model.js";
import { browserSession } from "./browser-session.js";
import { FormSite } from "./form-site.js";
import { browserFlowScript } from "./script.js";
import { browserTools } from "./tools.js";

export interface BrowserFlowOptions {
  /** Submissions of the local site are kept in `<dataDir>/browser-flow/submissions.json`. */
  dataDir: string;
  /** Streaming speed of the simulated model. Default 40, slow enough to watch. */
  tokensPerSecond?: number;
  /** Default `/usr/bin/chromium` (Debian's package), or `TETHER_CHROMIUM`. */
  chromiumPath?: string;
  /** The site the agent works on; by default one started (on a free local port) when first needed. */
  site?: FormSite;
}

export const defaultBrowserTask = "Request a demo of Northwind Analytics for Ada Lovelace (ada@example.com) from Analytical Engines Ltd, team plan.";

export function formSiteFor(dataDir: string): FormSite {
  return new FormSite({ dataFile: join(dataDir, "browser-flow", "submissions.json") });
}

/**
 * Drives Chromium through a local site's demo-request form: every page action is a tool call,
 * the browser is a resource, and the submission is an effect that a cancel withdraws.
 */
export function browserFlowAgent(options: BrowserFlowOptions): AgentDefinition {
  const site = options.site ?? formSiteFor(options.dataDir);
  return toolLoopAgent({
    name: "browser-flow",
    version: "1",
    description: "Drives a headless Chromium through a local site: opens it, fills in and submits a demo-request form. Cancel withdraws the submission and closes the browser.",
    system:
      "You operate a web browser. Read a page before acting on it, fill in every field a form asks for from the task, submit a form only once, and confirm the result.",
    model: new SimulatedModel({ script: browserFlowScript, tokensPerSecond: options.tokensPerSecond ?? 40, modelId: "sim-1" }),
    tools: browserTools(site),
    // Every tool acts on the one page: filling several fields at once makes them steal each
    // other's focus (the form is then refused), so a turn's calls run one after another.
    parallelToolCalls: false,
    resources: [browserSession({ executablePath: options.chromiumPath ?? process.env.TETHER_CHROMIUM })],
    maxTurns: 16,
    budgets: { maxSteps: 50, maxTokens: 60_000, maxCostUsd: 0.5, maxWallTimeMs: 10 * 60_000, maxRepeatedToolCalls: 3 },
    staleAfterMs: 60 * 60_000,
  });
}
