import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bundledAgents, exampleTasks } from "./index.js";

describe("bundledAgents", () => {
  it("returns the three examples, each described, budgeted and with a task that passes its input check", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tether-bundled-"));
    try {
      const agents = bundledAgents({ dataDir, tokensPerSecond: 100 });
      expect(agents.map((a) => a.name)).toEqual(["deep-research", "code-agent", "browser-flow"]);
      for (const agent of agents) {
        expect(agent.description, agent.name).toBeTruthy();
        expect(agent.budgets?.maxSteps, agent.name).toBeGreaterThan(0);
        expect(agent.input?.safeParse(exampleTasks[agent.name]).success, agent.name).toBe(true);
        expect(agent.init(exampleTasks[agent.name]).messages.at(-1)).toEqual({ role: "user", content: exampleTasks[agent.name] });
      }
      const research = agents[0];
      expect(research.input?.safeParse({ question: "why?" }).success).toBe(true);
      expect(research.input?.safeParse("").success).toBe(false);
      expect(agents[1].resources?.map((r) => [r.name, r.releaseOnPause])).toEqual([["workspace-lock", true]]);
      expect(agents[2].resources?.map((r) => r.name)).toEqual(["browser"]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
