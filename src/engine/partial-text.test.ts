import { afterEach, describe, expect, it } from "vitest";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { harness, TalkingModel, waitUntil, type Harness } from "../testing/index.js";
import { maxPartialTextChars } from "./executor.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

async function pausedMidStream(text: string, streamed: (model: TalkingModel) => boolean) {
  const model = new TalkingModel(text);
  h = harness([toolLoopAgent({ name: "talker", model })]);
  const run = await h.runtime.start("talker", "talk");
  await waitUntil(async () => streamed(model), { what: "the model to stream" });
  await h.runtime.pause(run.id, { actor: "alice" });
  await h.runtime.waitFor(run.id, ["paused"]);
  const aborted = (await h.runtime.journal(run.id)).find((e) => e.type === "call.aborted")!;
  return { model, aborted };
}

describe("the text of a model call a pause aborted", () => {
  it("is journaled with the abort: exactly what the model had streamed", async () => {
    const { model, aborted } = await pausedMidStream("The first finding is that pausing an agent must stop its stream at once. ".repeat(20), (m) => m.sent.length >= 600);
    expect(aborted.data).toMatchObject({ kind: "model", reason: "pause", streamedChars: model.sent.length, partialText: model.sent });
    expect(aborted.data.partialTextTruncated).toBeUndefined();
  });

  it("is bounded: a long text keeps its last 8 KiB, flagged as cut", async () => {
    const long = Array.from({ length: 500 }, (_, i) => `sentence ${i} of a long answer. `).join("");
    const { model, aborted } = await pausedMidStream(long, (m) => m.sent.length === long.length);
    expect(model.sent.length).toBeGreaterThan(maxPartialTextChars);
    expect(aborted.data).toMatchObject({ streamedChars: long.length, partialTextTruncated: true, partialText: long.slice(-maxPartialTextChars) });
  });
});
