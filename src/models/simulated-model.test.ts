import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../agents/tool-loop-agent.js";
import { tool } from "../engine/tool.js";
import { harness, type Harness } from "../testing/index.js";
import { stringForPattern } from "./schema-sample.js";
import { seededRandom } from "./seeded-random.js";
import { SimulatedModel } from "./simulated-model.js";
import type { Clock } from "../engine/clock.js";

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

describe("the simulated model picks the next tool from the conversation, not the order listed", () => {
  it("asks the tool that takes the task first, then the one an earlier result can feed, then the rest", async () => {
    const seen: { tool: string; input: unknown }[] = [];
    const record = (name: string, result: unknown) => async (input: unknown) => {
      seen.push({ tool: name, input });
      return result as never;
    };
    const summarise = tool({ name: "summarise", description: "Summarise notes", input: z.object({ style: z.enum(["short", "long"]) }), execute: record("summarise", { summary: "done" }) });
    const fetchPage = tool({ name: "fetch_page", description: "Fetch a page", input: z.object({ url: z.string().url() }), execute: record("fetch_page", { words: 1200 }) });
    const search = tool({ name: "search", description: "Search the web", input: z.object({ query: z.string() }), execute: record("search", { results: [{ url: "https://example.org/tides" }] }) });
    const agent = toolLoopAgent({ name: "picker", tools: [summarise, fetchPage, search], model: new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, rounds: 4 }) });
    h = harness([agent]);
    const run = await h.runtime.start("picker", "what moves the tides");
    expect((await h.runtime.waitFor(run.id, ["completed", "failed", "paused"])).status).toBe("completed");
    expect(seen.map((s) => s.tool)).toEqual(["search", "fetch_page", "summarise", "summarise"]);
    expect(seen[0].input).toEqual({ query: "what moves the tides" });
    expect(seen[1].input).toEqual({ url: "https://example.org/tides" });
  });
});

describe("the simulated model's arguments are valid for the tool's schema", () => {
  const schemas = {
    url: z.string().url(),
    email: z.email(),
    id: z.uuid(),
    when: z.iso.datetime(),
    day: z.iso.date(),
    code: z.string().regex(/^[A-Z]{3}-\d{2,4}$/),
    sku: z.string().regex(/^(?:sku|SKU)_[a-f0-9]{6}$/),
    title: z.string().min(20).max(24),
    short: z.string().max(3),
    count: z.number().int(),
    page: z.number().int().min(1).max(3),
    score: z.number().positive().lt(1),
    price: z.number().gt(100).multipleOf(5),
    ratio: z.number().max(0.5),
    tags: z.array(z.string().min(2)).min(2).max(3),
    pair: z.tuple([z.string(), z.number().int()]),
    counts: z.record(z.string(), z.number().int().nonnegative()),
    kind: z.enum(["a", "b"]),
    fixed: z.literal("x"),
    either: z.union([z.number().int().min(5), z.string()]),
    maybe: z.string().nullable(),
    nested: z.object({ at: z.iso.date(), keys: z.array(z.uuid()).length(2) }).strict(),
    both: z.object({ a: z.string() }).and(z.object({ b: z.boolean() })),
  };

  it("every sampled call passes the tool's own validation, for many seeds", async () => {
    const seen: unknown[] = [];
    const record = tool({
      name: "record",
      description: "Record a thing",
      input: z.object(schemas).strict(),
      execute: async (input) => {
        seen.push(input);
        return { ok: true };
      },
    });
    const agent = toolLoopAgent({ name: "recorder", tools: [record], model: "simulated:sim-1" });
    h = harness([agent]);
    for (let seed = 1; seed <= 20; seed++) {
      const run = await h.runtime.start("recorder", "record it", { model: `simulated:sim-1?seed=${seed}&tps=Infinity&rounds=2` });
      const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
      expect(done.status).toBe("completed");
      const errors = (await h.runtime.state(run.id)).messages.filter((m) => m.role === "tool" && m.isError);
      expect(errors, `seed ${seed}`).toEqual([]);
    }
    expect(seen).toHaveLength(40);
    for (const input of seen) expect(z.object(schemas).strict().safeParse(input).success).toBe(true);
    // Type limits (zod writes ±2^53 for .int()) are not taken as the range: the numbers stay small.
    expect(seen.every((input) => Math.abs((input as { count: number }).count) <= 10)).toBe(true);
  });

  it("writes strings for the common regular-expression subset, and says when it cannot", () => {
    const random = seededRandom(7);
    for (const pattern of ["^[A-Z]{3}-\\d{2}$", "^(foo|bar)+_\\w{3,5}$", "^v\\d+\\.\\d+\\.\\d+$", "^[a-z0-9._-]{1,8}@example\\.(com|org)$", "^#[0-9a-fA-F]{6}$"]) {
      const text = stringForPattern(pattern, random);
      expect(text, pattern).toMatch(new RegExp(pattern, "u"));
    }
    expect(stringForPattern("^(?!x)y$", random)).toBeUndefined();
    expect(stringForPattern("^(a)\\1$", random)).toBeUndefined();
  });
});

describe("the simulated model with scripted turns", () => {
  it("answers the n-th model call with the n-th turn: tool calls with their arguments, then the final text", async () => {
    const seen: { tool: string; input: unknown }[] = [];
    const lookup = tool({
      name: "lookup",
      description: "Look up an order",
      input: z.object({ orderId: z.string() }),
      execute: async (input) => {
        seen.push({ tool: "lookup", input });
        return { status: "shipped" };
      },
    });
    const notify = tool({
      name: "notify",
      description: "Tell the customer",
      input: z.object({ to: z.email(), text: z.string() }),
      execute: async (input) => {
        seen.push({ tool: "notify", input });
        return { sent: true };
      },
    });
    const model = new SimulatedModel({
      tokensPerSecond: Number.POSITIVE_INFINITY,
      script: [
        { text: "Checking both orders.", toolCalls: [{ toolName: "lookup", input: { orderId: "A-1" } }, { toolName: "lookup", input: { orderId: "B-2" } }] },
        { text: "Telling Ada.", toolCalls: [{ toolName: "notify", input: { to: "ada@example.com", text: "Both shipped" } }] },
        { text: "Both orders shipped; Ada knows." },
      ],
    });
    // Listed in the opposite order of their use: a script decides, not the list.
    h = harness([toolLoopAgent({ name: "support", tools: [notify, lookup], model })]);
    const run = await h.runtime.start("support", "where are my orders?");
    const done = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(done.status).toBe("completed");
    expect(done.output).toBe("Both orders shipped; Ada knows.");
    expect(seen).toEqual([
      { tool: "lookup", input: { orderId: "A-1" } },
      { tool: "lookup", input: { orderId: "B-2" } },
      { tool: "notify", input: { to: "ada@example.com", text: "Both shipped" } },
    ]);
  });

  it("a model call past the last turn fails with model_error, saying so, and the run pauses", async () => {
    const model = new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script: [{ text: "Looking.", toolCalls: [{ toolName: "lookup", input: { orderId: "A-1" } }] }] });
    const lookup = tool({ name: "lookup", description: "Look up an order", input: z.object({ orderId: z.string() }), execute: async () => ({ status: "shipped" }) });
    h = harness([toolLoopAgent({ name: "short", tools: [lookup], model })]);
    const run = await h.runtime.start("short", "where is my order?");
    const paused = await h.runtime.waitFor(run.id, ["completed", "failed", "paused"]);
    expect(paused).toMatchObject({
      status: "paused",
      statusReason: "model_error: the simulated model's script has 1 turn and this is model call 2 of the run: add a turn, or end the last one without tool calls",
    });
    expect((await h.runtime.journal(run.id)).filter((e) => e.type === "call.failed")).toHaveLength(1);
  });
});

/** A clock that moves only when told, and keeps every sleep asked of it until then. */
class ManualClock implements Clock {
  time = 1_000;
  readonly sleeps: { until: number; wake: () => void }[] = [];
  now(): number {
    return this.time;
  }
  sleep(ms: number): Promise<void> {
    return new Promise((wake) => this.sleeps.push({ until: this.time + ms, wake }));
  }
  async advance(ms: number): Promise<void> {
    this.time += ms;
    for (const sleep of this.sleeps.filter((s) => s.until <= this.time)) {
      this.sleeps.splice(this.sleeps.indexOf(sleep), 1);
      sleep.wake();
    }
    for (let i = 0; i < 20; i++) await Promise.resolve();
  }
}

describe("the simulated model's pace", () => {
  const turns = [{ text: "one two three four five six" }];
  const request = { messages: [{ role: "user" as const, content: "go" }], tools: [] };

  /** Reads the stream in the background; `texts` is what has arrived so far. */
  function reader(model: SimulatedModel, signal = new AbortController().signal) {
    const texts: string[] = [];
    const done = (async () => {
      for await (const part of model.stream(request, { signal, idempotencyKey: "k" })) if (part.type === "text-delta") texts.push(part.text);
    })();
    return { texts, done };
  }

  it("streams the n-th token n/tokensPerSecond after the first read", async () => {
    const clock = new ManualClock();
    const { texts, done } = reader(new SimulatedModel({ tokensPerSecond: 100, script: turns, clock }));
    await clock.advance(0);
    expect(texts).toEqual([]);
    await clock.advance(10);
    expect(texts).toEqual(["one "]);
    await clock.advance(9);
    expect(texts).toEqual(["one "]);
    await clock.advance(21);
    expect(texts).toEqual(["one ", "two ", "thre", "e "]);
    await clock.advance(30);
    await done;
    expect(texts.join("")).toBe("one two three four five six");
  });

  it("keeps its pace when the reader falls behind: the tokens already due arrive without a wait", async () => {
    const clock = new ManualClock();
    const model = new SimulatedModel({ tokensPerSecond: 100, script: turns, clock });
    const stream = model.stream(request, { signal: new AbortController().signal, idempotencyKey: "k" });
    await stream.next(); // the usage part, at once: the stream's clock starts here
    const first = stream.next();
    await clock.advance(10);
    expect((await first).value).toEqual({ type: "text-delta", text: "one " });
    clock.time += 40; // the reader was busy for 40 ms
    const asked = clock.sleeps.length;
    const due = [await stream.next(), await stream.next(), await stream.next(), await stream.next()];
    expect(due.map((r) => (r.value as { text: string }).text)).toEqual(["two ", "thre", "e ", "four "]);
    expect(clock.sleeps.length).toBe(asked);
    const later = stream.next();
    expect(clock.sleeps.map((s) => s.until)).toContain(1_060);
    await clock.advance(10);
    expect((await later).value).toEqual({ type: "text-delta", text: "five " });
  });

  it("streams usage, the text token by token, the tool calls, then finish with the tokens it streamed", async () => {
    const script = [{ text: "Looking it up now.", toolCalls: [{ toolName: "lookup", input: { orderId: "A-1" } }] }];
    const model = new SimulatedModel({ tokensPerSecond: Number.POSITIVE_INFINITY, script });
    const parts = [];
    for await (const part of model.stream(request, { signal: new AbortController().signal, idempotencyKey: "k" })) parts.push(part);
    expect(parts.map((p) => (p.type === "text-delta" ? p.text : p.type))).toEqual(["usage", "Look", "ing ", "it ", "up ", "now.", "tool-call", "finish"]);
    const toolTokens = Math.ceil(JSON.stringify({ orderId: "A-1" }).length / 4) + 2;
    expect(parts.at(-1)).toEqual({ type: "finish", finishReason: "tool-calls", usage: { inputTokens: 1, outputTokens: 5 + toolTokens } });
    // A stream read past its end stays ended.
    const stream = model.stream(request, { signal: new AbortController().signal, idempotencyKey: "k" });
    while (!(await stream.next()).done);
    expect(await stream.next()).toEqual({ done: true, value: undefined });
  });

  it("wakes every stream due in the same millisecond from one timer", async () => {
    const clock = new ManualClock();
    const streams = Array.from({ length: 50 }, () => reader(new SimulatedModel({ tokensPerSecond: 100, script: turns, clock })));
    await clock.advance(0);
    expect(clock.sleeps).toHaveLength(1);
    await clock.advance(10);
    expect(streams.every((s) => s.texts.length === 1)).toBe(true);
    expect(clock.sleeps).toHaveLength(1);
    await clock.advance(60);
    await Promise.all(streams.map((s) => s.done));
    expect(streams.every((s) => s.texts.join("") === "one two three four five six")).toBe(true);
  });

  it("an abort rejects the pending token at once, without waiting for it to fall due", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const { texts, done } = reader(new SimulatedModel({ tokensPerSecond: 100, script: turns, clock }), controller.signal);
    await clock.advance(10);
    controller.abort(new Error("paused"));
    await expect(done).rejects.toThrow("paused");
    expect(texts).toEqual(["one "]);
  });
});
