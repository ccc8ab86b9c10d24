import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, waitUntil, type Harness } from "../testing/index.js";
import { PARTIAL_TEXT_LIMIT, partialText } from "./call-journal.js";

const writer = toolLoopAgent({ name: "writer", tools: [] });
const slowModel = "simulated:sim-1?seed=7&tps=200";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("the text of a model stream aborted by a pause", () => {
  it("is journaled with the aborted call: exactly the text streamed to watchers before the abort", async () => {
    h = harness([writer]);
    const rt = h.runtime;
    const run = await rt.start("writer", "write a paragraph", { model: slowModel });
    const deltas: string[] = [];
    const unsubscribe = rt.subscribe(run.id, {}, (event) => {
      if (event.kind === "live" && event.type === "model.delta") deltas.push(String(event.data.text));
    });
    await waitUntil(() => deltas.length >= 3, { what: "three model deltas" });
    await rt.pause(run.id, { actor: "alice" });
    await rt.waitFor(run.id, ["paused"]);
    await rt.settled(run.id);
    unsubscribe();

    const journal = await rt.journal(run.id, { limit: 1000 });
    const aborted = journal.find((e) => e.type === "call.aborted")!;
    expect(aborted.data).toMatchObject({ kind: "model", reason: "pause" });
    expect(aborted.data.partialText).toBe(deltas.join(""));
    expect(aborted.data.streamedChars).toBe(deltas.join("").length);
    expect(aborted.data.partialTextTruncated).toBeUndefined();
  });

  it("is bounded: a longer text keeps its first PARTIAL_TEXT_LIMIT characters and says it was cut", () => {
    const long = "abcdefgh".repeat(PARTIAL_TEXT_LIMIT / 4);
    expect(partialText(long)).toEqual({ partialText: long.slice(0, PARTIAL_TEXT_LIMIT), partialTextTruncated: true });
    expect(partialText("short")).toEqual({ partialText: "short" });
  });
});
