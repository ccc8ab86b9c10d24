import { afterEach, describe, expect, it } from "vitest";
import { SseParser } from "../../src/client/sse-parser.js";
import { createApp } from "../../src/server/app.js";
import { harness, sequenceAgent, TestClock, type Harness } from "../../src/testing/index.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** The `event: run` messages of an SSE response until none came for `quietMs`. */
async function runEvents(response: Response, quietMs: number): Promise<{ id: string; status: string }[]> {
  const reader = response.body!.getReader();
  const parser = new SseParser();
  const decoder = new TextDecoder();
  const views: { id: string; status: string }[] = [];
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([reader.read(), new Promise<"quiet">((resolve) => (timer = setTimeout(() => resolve("quiet"), quietMs)))]);
    clearTimeout(timer);
    if (result === "quiet" || result.done) break;
    for (const message of parser.push(decoder.decode(result.value, { stream: true }))) {
      if (message.event === "run") views.push(JSON.parse(message.data) as { id: string; status: string });
    }
  }
  await reader.cancel().catch(() => undefined);
  return views;
}

describe("GET /events: the feed of run changes", () => {
  it("re-sends every run changed since ?after (Last-Event-ID), however many changed at once, each once", async () => {
    const clock = new TestClock();
    h = harness([sequenceAgent({ name: "noop", tools: [], steps: [] })], { clock, worker: false });
    const rt = h.runtime;
    const since = clock.now();
    clock.advance(1);
    // 1,001 runs change after `since`, all in one instant, and 500 more a moment later.
    const created: string[] = [];
    for (let i = 0; i < 1001; i++) created.push((await rt.start("noop", null)).id);
    clock.advance(1);
    for (let i = 0; i < 500; i++) created.push((await rt.start("noop", null)).id);
    const app = createApp({ runtime: rt, auth: { mode: "off" }, version: "test", heartbeatMs: 60_000 });

    const response = await app.fetch(new Request(`http://localhost/api/v1/events?after=${since}`, { headers: { accept: "text/event-stream" } }));
    expect(response.status).toBe(200);
    const views = await runEvents(response, 1_500);
    expect(views.map((v) => v.id).sort()).toEqual([...created].sort());
  });
});
