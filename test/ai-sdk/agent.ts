import { appendFileSync } from "node:fs";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { stepCountIs, streamText, tool, ToolLoopAgent } from "ai";
import { z } from "zod";
import { durableAgent } from "../../src/index.js";

/** An AI SDK tool that appends each execution to `toolLogPath`. */
function lookupTool(toolLogPath: string) {
  return tool({
    description: "Look a word up",
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      appendFileSync(toolLogPath, `${JSON.stringify({ query, pid: process.pid })}\n`);
      return { definition: `${query}: a word` };
    },
  });
}

/**
 * An ordinary AI SDK agent (`streamText` with a tool and `stopWhen`) made durable by the two
 * lines the docs show: `ctx.aiSdk.model(...)` and `ctx.aiSdk.tools(...)`. Every execution of the
 * tool is appended to `toolLogPath`, so a test in another process counts them.
 */
export function aiSdkResearcher(baseURL: string, toolLogPath: string) {
  const provider = createOpenAICompatible({ name: "wire", baseURL, includeUsage: true });
  return durableAgent({
    name: "ai-sdk-researcher",
    input: z.object({ question: z.string() }),
    run: async (ctx, { question }) => {
      const result = streamText({
        model: ctx.aiSdk.model(provider("wire-model")),
        system: "You look words up.",
        prompt: question,
        tools: ctx.aiSdk.tools({
          lookup: lookupTool(toolLogPath),
        }),
        stopWhen: stepCountIs(5),
      });
      return { text: await result.text, steps: (await result.steps).length };
    },
  });
}

/** The AI SDK's own `ToolLoopAgent` (generateText underneath), made durable the same way. */
export function aiSdkToolLoop(baseURL: string, toolLogPath: string) {
  const provider = createOpenAICompatible({ name: "wire", baseURL, includeUsage: true });
  return durableAgent({
    name: "ai-sdk-tool-loop",
    input: z.object({ question: z.string() }),
    run: async (ctx, { question }) => {
      const agent = new ToolLoopAgent({
        model: ctx.aiSdk.model(provider("wire-model")),
        instructions: "You look words up.",
        tools: ctx.aiSdk.tools(
          {
            lookup: lookupTool(toolLogPath),
          },
          { lookup: { idempotent: true } },
        ),
        stopWhen: stepCountIs(5),
      });
      const result = await agent.generate({ prompt: question });
      return { text: result.text, steps: result.steps.length };
    },
  });
}
