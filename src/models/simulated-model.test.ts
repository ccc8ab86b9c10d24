import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { tool } from "../engine/tool.js";
import { harness, type Harness } from "../testing/index.js";
import { SimulatedModel } from "./simulated-model.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("the simulated model's default script with a user's own tools", () => {
  it("asks with the task, passes on what earlier tools returned, and says what they returned", async () => {
    const seen: { tool: string; input: unknown }[] = [];
    const search = tool({
      name: "search",
      description: "Search the web",
      input: z.object({ query: z.string() }),
      execute: async (input) => {
        seen.push({ tool: "search", input });
        return { results: [{ url: "https://example.org/pause", title: "On pausing" }] };
      },
    });
    const fetchPage = tool({
      name: "fetch_page",
      description: "Fetch a page",
      input: z.object({ url: z.string() }),
      execute: async (input) => {
        seen.push({ tool: "fetch_page", input });
        return { words: 1200 };
      },
    });
    const agent = toolLoopAgent({ name: "reader", tools: [search, fetchPage], model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, rounds: 2 }) });
    h = harness([agent]);
    const run = await h.runtime.start("reader", "how do agents pause safely");
    const done = await h.runtime.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(seen).toEqual([
      { tool: "search", input: { query: "how do agents pause safely" } },
      { tool: "fetch_page", input: { url: "https://example.org/pause" } },
    ]);
    const state = await h.runtime.state(run.id);
    const last = state.messages[state.messages.length - 1];
    expect(last).toMatchObject({ role: "assistant" });
    expect(String(last.content)).toMatch(/^Final answer: fetch_page returned \{"words":1200\}\./);
  });
});
