import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";
import { TetherError } from "./errors.js";
import type { Message } from "./state.js";
import { tool } from "./tool.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("say: steering a run without stopping it", () => {
  it("the message is journaled at once and reaches the model's next request, with no pause", async () => {
    const requests: Message[][] = [];
    let release: (() => void) | undefined;
    const lookup = tool({
      name: "lookup",
      description: "Look something up",
      input: z.object({ q: z.string() }),
      execute: () => new Promise<{ found: number }>((resolve) => (release = () => resolve({ found: 3 }))),
    });
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: ({ request, turn }) => {
        requests.push(request.messages.slice());
        return turn === 0 ? { text: "Looking.", toolCalls: [{ toolName: "lookup", input: { q: "pausing" } }] } : { text: "Done." };
      },
    });
    h = harness([toolLoopAgent({ name: "steered", tools: [lookup], model })]);
    const rt = h.runtime;
    const run = await rt.start("steered", "research pausing");
    await waitUntil(() => release !== undefined, { what: "the tool to start" });
    const { message } = await rt.say(run.id, "Focus on primary sources, please.", { actor: "alice" });
    // Journaled at once, while the tool still runs.
    const queued = (await rt.journal(run.id)).find((e) => e.type === "message.queued");
    expect(queued?.data).toEqual({ id: message.id, actor: "alice", text: "Focus on primary sources, please." });
    expect((await rt.get(run.id)).status).toBe("running");
    release!();
    const done = await rt.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");

    // The second model request carries it, as a user message after the tool's result.
    expect(requests).toHaveLength(2);
    expect(requests[1].slice(-2).map((m) => m.role)).toEqual(["tool", "user"]);
    expect(requests[1].at(-1)).toMatchObject({ role: "user", content: "Focus on primary sources, please.", author: "alice" });
    const journal = await rt.journal(run.id);
    const at = (type: string, pick: (e: (typeof journal)[number]) => boolean = () => true) => journal.findIndex((e) => e.type === type && pick(e));
    const delivered = at("message.delivered");
    expect(journal[delivered].data).toMatchObject({ id: message.id, actor: "alice" });
    expect(at("message.queued")).toBeLessThan(delivered);
    expect(delivered).toBeLessThan(at("call.started", (e) => e.data.kind === "model" && (e.callSeq ?? 0) > 1));
    expect(journal.filter((e) => e.type === "status").map((e) => e.data.to)).toEqual(["running", "completed"]);
    expect((await rt.state(run.id)).messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["research pausing", "Focus on primary sources, please."]);
  });

  it("refuses a message to a finished run, and an empty one, with their codes", async () => {
    h = harness([toolLoopAgent({ name: "quick", model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY }) })]);
    const run = await h.runtime.start("quick", "hi");
    await h.runtime.waitFor(run.id, ["completed"]);
    const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => (TetherError.isInstance(e) ? e.code : String(e)));
    expect(await codeOf(h.runtime.say(run.id, "too late"))).toBe("illegal_transition");
    const other = await h.runtime.start("quick", "again");
    expect(await codeOf(h.runtime.say(other.id, "   "))).toBe("invalid_state_patch");
    expect(await codeOf(h.runtime.say("run_missing", "hello"))).toBe("run_not_found");
  });
});
