import { ProxyTracer, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it, vi } from "vitest";
import { defineAgent, type AgentDefinition } from "../engine/agent.js";
import { ModelCallError } from "../engine/errors.js";
import type { TetherModel } from "../engine/model.js";
import { SecretRedactor } from "../engine/secrets.js";
import { SimulatedModel } from "../models/simulated-model.js";
import { effectTool, harness, Ledger, waitUntil, type Harness } from "../testing/index.js";
import { traceRuns } from "./run-tracing.js";

const prompt = "PROMPT-TEXT-never-in-a-span";
const secretInput = "TOOL-INPUT-never-in-a-span";

let h: Harness | undefined;
let stop: (() => void) | undefined;
afterEach(async () => {
  stop?.();
  stop = undefined;
  await h?.cleanup();
  h = undefined;
});

/** One model call, then publish (compensable), then a long abortable wait, then done. */
function tracedAgent(ledger: Ledger, model: TetherModel = new SimulatedModel({ tokensPerSecond: Infinity, rounds: 0 })): AgentDefinition {
  const tools = [effectTool({ name: "publish", ledger, compensable: true }), effectTool({ name: "wait", ledger, durationMs: 10_000, abortable: true })];
  return defineAgent({
    name: "traced",
    version: "1",
    tools,
    model,
    init: () => ({ messages: [{ role: "user", content: prompt }], vars: { step: 0 } }),
    next(state) {
      const step = Number(state.vars.step);
      if (step === 0) return { type: "model", request: { messages: state.messages, tools: [] } };
      if (step === 1) return { type: "tool", toolCallId: "call-publish", toolName: "publish", input: { id: secretInput } };
      if (step === 2) return { type: "tool", toolCallId: "call-wait", toolName: "wait", input: { id: "w" } };
      return { type: "done", output: step };
    },
    apply(state) {
      state.vars = { ...state.vars, step: Number(state.vars.step) + 1 };
    },
  });
}

function tracing(captureContent = false) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, options: { tracerProvider: provider, captureContent } };
}

const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe("OpenTelemetry spans of a run", () => {
  it("a paused, resumed and cancelled run: run, model, tool, control and compensation spans with their parents", async () => {
    const ledger = new Ledger();
    h = harness([tracedAgent(ledger)]);
    const { exporter, options } = tracing();
    stop = traceRuns(h.runtime, options);
    const rt = h.runtime;

    const run = await rt.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await rt.pause(run.id, { actor: "alice", reason: "REASON-free-text", wait: true });
    await rt.resume(run.id, { actor: "alice" });
    await waitUntil(() => ledger.executionsOf("wait") === 2);
    await rt.cancel(run.id, { actor: "bob", reason: "wrong customer" });
    await rt.waitFor(run.id, ["cancelled"]);
    await waitUntil(() => exporter.getFinishedSpans().some((s) => s.name.startsWith("invoke_agent") && s.attributes["tether.run.status"] === "cancelled"));
    const spans = exporter.getFinishedSpans();

    // Two stretches of execution: until the pause, and from the resume until cancelled; the second links to the first.
    const runs = named(spans, "invoke_agent traced");
    expect(runs.map((s) => s.attributes["tether.run.status"])).toEqual(["paused", "cancelled"]);
    const [first, second] = runs;
    for (const span of runs) {
      expect(span.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "traced", "tether.run.id": run.id });
      expect(parentOf(span)).toBeUndefined();
    }
    expect(second.links.map((l) => l.context.spanId)).toEqual([first.spanContext().spanId]);
    expect(second.spanContext().traceId).not.toBe(first.spanContext().traceId);

    // The model call, following the GenAI semantic conventions.
    const [chat] = named(spans, "chat sim-1");
    expect(chat.kind).toBe(2); // CLIENT
    expect(parentOf(chat)).toBe(first.spanContext().spanId);
    expect(chat.attributes).toMatchObject({ "gen_ai.operation.name": "chat", "gen_ai.provider.name": "simulated", "gen_ai.request.model": "sim-1", "tether.call.outcome": "completed" });
    expect(chat.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
    expect(chat.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
    expect(chat.attributes["gen_ai.response.finish_reasons"]).toEqual(["stop"]);

    // Tool calls: publish completed; wait aborted by the pause, then again by the cancel.
    const [publish] = named(spans, "execute_tool publish");
    expect(publish.attributes).toMatchObject({ "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "publish", "gen_ai.tool.call.id": "call-publish", "tether.call.outcome": "completed" });
    expect(parentOf(publish)).toBe(first.spanContext().spanId);
    const waits = named(spans, "execute_tool wait");
    expect(waits.map((s) => [s.attributes["tether.call.outcome"], s.attributes["tether.call.abort_reason"], parentOf(s)])).toEqual([
      ["aborted", "pause", first.spanContext().spanId],
      ["aborted", "cancel", second.spanContext().spanId],
    ]);

    // Control commands, each as recorded, under the stretch it happened in.
    const controls = spans.filter((s) => s.name.startsWith("control "));
    expect(controls.map((s) => [s.name, s.attributes["tether.control.actor"]])).toEqual([
      ["control pause", "alice"],
      ["control resume", "alice"],
      ["control cancel", "bob"],
    ]);
    expect(parentOf(controls[0])).toBe(first.spanContext().spanId);
    expect(parentOf(controls[2])).toBe(second.spanContext().spanId);

    // The cancel compensated publish, inside the second stretch.
    const [compensate] = named(spans, "compensate publish");
    expect(compensate.attributes).toMatchObject({ "tether.compensation.outcome": "succeeded", "gen_ai.tool.name": "publish" });
    expect(parentOf(compensate)).toBe(second.spanContext().spanId);

    // Times are the journal's: every child lies within its parent.
    for (const span of spans) {
      const parent = spans.find((p) => p.spanContext().spanId === parentOf(span));
      if (!parent) continue;
      expect(toMs(span.startTime)).toBeGreaterThanOrEqual(toMs(parent.startTime));
      expect(toMs(span.endTime)).toBeLessThanOrEqual(toMs(parent.endTime));
    }

    // No prompt text, tool input or free-text reason in any attribute by default.
    const text = JSON.stringify(spans.map((s) => s.attributes));
    for (const secret of [prompt, secretInput, "REASON-free-text", "wrong customer"]) expect(text).not.toContain(secret);
  });

  it("with captureContent, tool inputs and control reasons are recorded", async () => {
    const ledger = new Ledger();
    h = harness([tracedAgent(ledger)]);
    const { exporter, options } = tracing(true);
    stop = traceRuns(h.runtime, options);
    const run = await h.runtime.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await h.runtime.cancel(run.id, { actor: "bob", reason: "wrong customer" });
    await h.runtime.waitFor(run.id, ["cancelled"]);
    await waitUntil(() => exporter.getFinishedSpans().some((s) => s.name === "invoke_agent traced"));
    const spans = exporter.getFinishedSpans();
    expect(JSON.parse(String(named(spans, "execute_tool publish")[0].attributes["gen_ai.tool.call.arguments"]))).toEqual({ id: secretInput });
    expect(named(spans, "control cancel")[0].attributes["tether.control.reason"]).toBe("wrong customer");
    // The prompt is never journaled as a call attribute, so it is not captured either.
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(prompt);
  });
});

describe("OpenTelemetry spans of failures and secrets", () => {
  it("a failed model call is an ERROR span with its code; the stretch ends paused", async () => {
    const failing: TetherModel = {
      specificationVersion: "tether-model-v1",
      provider: "openai",
      modelId: "gpt-4o-mini",
      async *stream() {
        throw new ModelCallError("openai:gpt-4o-mini failed: HTTP 429: slow down", { statusCode: 429 });
      },
    };
    h = harness([tracedAgent(new Ledger(), failing)]);
    const { exporter, options } = tracing();
    stop = traceRuns(h.runtime, options);
    const run = await h.runtime.start("traced", null);
    await h.runtime.waitFor(run.id, ["paused"]);
    await waitUntil(() => exporter.getFinishedSpans().some((s) => s.name === "invoke_agent traced"));
    const [chat] = named(exporter.getFinishedSpans(), "chat gpt-4o-mini");
    expect(chat.status.code).toBe(2); // ERROR
    expect(chat.attributes).toMatchObject({ "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini", "error.type": "model_error", "tether.call.outcome": "failed" });
    expect(named(exporter.getFinishedSpans(), "invoke_agent traced")[0].attributes["tether.run.status"]).toBe("paused");
  });

  it("even with captureContent, a secret (here the tool input) is redacted, as the journal holds it", async () => {
    const ledger = new Ledger();
    h = harness([tracedAgent(ledger)], { redactor: SecretRedactor.fromEnvironment({}, [secretInput]) });
    const { exporter, options } = tracing(true);
    stop = traceRuns(h.runtime, options);
    const run = await h.runtime.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    await h.runtime.cancel(run.id, { actor: "bob", reason: `leaked ${secretInput}` });
    await h.runtime.waitFor(run.id, ["cancelled"]);
    await waitUntil(() => exporter.getFinishedSpans().some((s) => s.name === "invoke_agent traced"));
    const text = JSON.stringify(exporter.getFinishedSpans().map((s) => s.attributes));
    expect(text).toContain("gen_ai.tool.call.arguments");
    expect(text).not.toContain(secretInput);
  });
});

describe("OpenTelemetry spans through the global provider", () => {
  afterEach(() => {
    trace.disable();
    vi.restoreAllMocks();
  });

  it("with no provider registered no span is started; once one is registered, running runs are traced from their next call, resume or undo", async () => {
    const startSpan = vi.spyOn(ProxyTracer.prototype, "startSpan");
    const ledger = new Ledger();
    h = harness([tracedAgent(ledger)]);
    stop = traceRuns(h.runtime);
    const early = await h.runtime.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 1);
    const direct = await h.runtime.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 2);
    // Two model calls, two publishes, two waits and their runs: not one span started for nothing.
    expect(startSpan).not.toHaveBeenCalled();

    const { exporter, options } = tracing();
    expect(trace.setGlobalTracerProvider(options.tracerProvider)).toBe(true);
    await h.runtime.pause(early.id, { actor: "alice", wait: true });
    await h.runtime.resume(early.id, { actor: "alice" });
    await waitUntil(() => ledger.executionsOf("wait") === 3);
    const late = await h.runtime.start("traced", null);
    await waitUntil(() => ledger.executionsOf("wait") === 4);
    for (const run of [early, direct, late]) await h.runtime.cancel(run.id, { actor: "bob" });
    for (const run of [early, direct, late]) await h.runtime.waitFor(run.id, ["cancelled"]);

    const ofRun = (id: string) => exporter.getFinishedSpans().filter((s) => s.attributes["tether.run.id"] === id).map((s) => s.name);
    await waitUntil(() => named(exporter.getFinishedSpans(), "invoke_agent traced").length === 2 && ofRun(direct.id).includes("compensate publish"));
    // The early run: nothing of its first stretch (model call, publish, the wait until the pause);
    // its resumed wait, the cancel and the undoing of publish are.
    expect(ofRun(early.id)).not.toContain("chat sim-1");
    expect(ofRun(early.id)).not.toContain("execute_tool publish");
    expect(ofRun(early.id).filter((name) => name === "execute_tool wait")).toHaveLength(1);
    expect(ofRun(early.id)).toEqual(expect.arrayContaining(["execute_tool wait", "control cancel", "compensate publish", "invoke_agent traced"]));
    // Cancelled in the call it was making when the provider came: the cancel and the undo.
    expect(ofRun(direct.id)).toEqual(expect.arrayContaining(["control cancel", "compensate publish"]));
    expect(ofRun(direct.id)).not.toContain("chat sim-1");
    expect(ofRun(late.id)).toEqual(expect.arrayContaining(["chat sim-1", "execute_tool publish", "execute_tool wait", "compensate publish", "invoke_agent traced"]));
  });
});

describe("OpenTelemetry spans of a run another process executes", () => {
  it("a command given here is a root span of its own; the calls are traced where they run", async () => {
    const ledger = new Ledger();
    h = harness([tracedAgent(ledger)]);
    const executing = h.open();
    const here = tracing();
    const there = tracing();
    stop = traceRuns(h.runtime, here.options);
    const stopThere = traceRuns(executing, there.options);
    try {
      const run = await executing.start("traced", null);
      await waitUntil(() => ledger.executionsOf("wait") === 1);
      await h.runtime.pause(run.id, { actor: "alice" });
      await executing.waitFor(run.id, ["paused"]);
      await waitUntil(() => there.exporter.getFinishedSpans().some((s) => s.name === "invoke_agent traced"));
      const spansHere = here.exporter.getFinishedSpans();
      expect(spansHere.map((s) => [s.name, parentOf(s)])).toEqual([["control pause", undefined]]);
      expect(there.exporter.getFinishedSpans().map((s) => s.name)).toEqual(["chat sim-1", "execute_tool publish", "execute_tool wait", "invoke_agent traced"]);
    } finally {
      stopThere();
    }
  });
});

function toMs([seconds, nanos]: [number, number]): number {
  return seconds * 1000 + nanos / 1e6;
}
