import type { AgentDefinition } from "../../src/engine/agent.js";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import { SimulatedModel } from "../../src/models/simulated-model.js";
import { toolLatencyFor } from "../shared/delay.js";
import { exampleAsset } from "../shared/package-root.js";
import { codeAgentScript } from "./script.js";
import { codeTools } from "./tools.js";
import { workspaceLock } from "./workspace-lock.js";
import { Workspace } from "./workspace.js";

export interface CodeAgentOptions {
  /** The folder the agent edits; created from `template` if it does not exist. */
  workspace: string;
  /** Default: the small project shipped with the example (`examples/code-agent/workspace-template`). */
  template?: string;
  /** Streaming speed of the simulated model. Default 40, slow enough to watch. */
  tokensPerSecond?: number;
}

export const defaultCodeTask = "Fix the off-by-one in src/range.js: range(1, 3) must include 3. Add a regression test and a changelog entry.";

/**
 * Edits a workspace through draft copies while holding its lock file. Pause frees the lock;
 * cancel discards the drafts, puts every applied file back as it was, and frees the lock.
 */
export function codeAgent(options: CodeAgentOptions): AgentDefinition {
  const tokensPerSecond = options.tokensPerSecond ?? 40;
  const workspace = new Workspace(options.workspace);
  const template = options.template ?? exampleAsset("code-agent", "workspace-template");
  return toolLoopAgent({
    name: "code-agent",
    version: "1",
    description: "Fixes code in a workspace folder through draft copies while holding the workspace lock; runs the tests. Cancel restores every file.",
    system:
      "You are a careful software engineer. Read before you write. Every change goes through write_draft, then apply_draft. " +
      "Run the tests before and after changing code. Keep changes minimal.",
    model: new SimulatedModel({ script: codeAgentScript, tokensPerSecond, modelId: "sim-1" }),
    tools: codeTools({ workspace, latencyMs: toolLatencyFor(tokensPerSecond, 150) }),
    resources: [workspaceLock(workspace, template)],
    maxTurns: 20,
    budgets: { maxSteps: 60, maxTokens: 60_000, maxCostUsd: 0.5, maxWallTimeMs: 15 * 60_000, maxRepeatedToolCalls: 3 },
    staleAfterMs: 24 * 60 * 60_000,
  });
}
