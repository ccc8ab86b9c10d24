import type * as OtelApi from "@opentelemetry/api";
import type { Span, SpanContext, Tracer } from "@opentelemetry/api";
import type { EventBus } from "../engine/events.js";
import type { JsonObject } from "../engine/json.js";
import { optionalRequire, requireInstalled } from "../engine/optional-import.js";
import type { JournalEntry, Store } from "../engine/store.js";

/**
 * OpenTelemetry spans for runs, read from the journal as this process writes it: so every run,
 * model call, tool call, compensation and control command becomes a span without the engine
 * knowing about tracing, and with the journal's own times (an injected clock in tests).
 *
 * - `invoke_agent {agent}` (INTERNAL): one per stretch of execution, from `running` until the
 *   run pauses or ends; a resumed run's next one links to the previous one.
 * - `chat {model}` (CLIENT, GenAI semantic conventions): a model call, with
 *   `gen_ai.request.model`, `gen_ai.provider.name`, `gen_ai.usage.input_tokens`,
 *   `gen_ai.usage.output_tokens` and `gen_ai.response.finish_reasons`.
 * - `execute_tool {tool}` (INTERNAL): a tool call, with `gen_ai.tool.name` and `gen_ai.tool.call.id`.
 * - `compensate {tool}` (INTERNAL): one attempt to undo an effect while a run is cancelled.
 * - `control {command}` (INTERNAL): a pause, resume, cancel, … as recorded, with its actor.
 *
 * No prompt, model text, tool input or free-text reason is put in attributes unless
 * `captureContent` is set (and what is captured is what the journal holds: secrets redacted).
 * `@opentelemetry/api` is an optional peer; with no provider registered its tracer is a no-op.
 */
export interface RunTracingOptions {
  /** Where spans go. Default: the global provider registered with `@opentelemetry/api`. */
  tracerProvider?: { getTracer(name: string, version?: string): unknown };
  /** Put tool inputs and control reasons in attributes (off by default). */
  captureContent?: boolean;
  /** Looks up the agent of a run this process did not create (default: none; its span is then named `invoke_agent`). */
  store?: Pick<Store, "getRun">;
}

/** What `traceRuns` needs of a runtime: its event bus, and its store to name runs it did not start. */
export interface TraceableRuntime {
  readonly bus: EventBus;
  readonly store?: Pick<Store, "getRun">;
}

export const tracerName = "tether-runtime";

interface RunSpans {
  agent: string | undefined;
  run: Span | undefined;
  /** The last finished `invoke_agent` span, linked from the next one. */
  previous: SpanContext | undefined;
  calls: Map<number, Span>;
  compensations: Map<number, Span>;
}

/** Whether `@opentelemetry/api` is installed (tracing is then on by default in `createTether` and the CLI). */
export function tracingAvailable(): boolean {
  try {
    requireInstalled("@opentelemetry/api", "tracing");
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a tracer provider is registered with `api` now. Without one, the global tracer is
 * OpenTelemetry's no-op (its delegate is the API's own no-op provider, the one a fresh
 * `ProxyTracerProvider` hands out), and each entry's span would cost its attributes for nothing.
 * A provider registered through another copy of the API is never mistaken for none.
 */
function globalProviderRegistered(api: typeof OtelApi): () => boolean {
  const none = new api.ProxyTracerProvider().getDelegate();
  return () => {
    const provider = api.trace.getTracerProvider();
    return !(provider instanceof api.ProxyTracerProvider) || provider.getDelegate() !== none;
  };
}

/**
 * Traces the runs `runtime` executes; returns a function that stops it (ending open spans).
 * Throws `missing_dependency` if `@opentelemetry/api` is not installed.
 */
export function traceRuns(runtime: TraceableRuntime, options: RunTracingOptions = {}): () => void {
  const api = optionalRequire<typeof OtelApi>("@opentelemetry/api", "tracing runs with OpenTelemetry");
  const tracer = (options.tracerProvider?.getTracer(tracerName) as Tracer | undefined) ?? api.trace.getTracer(tracerName);
  const store = options.store ?? runtime.store;
  const capture = options.captureContent === true;
  const runs = new Map<string, RunSpans>();
  const recording = options.tracerProvider ? () => true : globalProviderRegistered(api);

  const spansOf = (runId: string): RunSpans => {
    let spans = runs.get(runId);
    if (!spans) runs.set(runId, (spans = { agent: undefined, run: undefined, previous: undefined, calls: new Map(), compensations: new Map() }));
    return spans;
  };
  const transient = (): RunSpans => ({ agent: undefined, run: undefined, previous: undefined, calls: new Map(), compensations: new Map() });
  const parentOf = (spans: RunSpans) => (spans.run ? api.trace.setSpan(api.context.active(), spans.run) : api.context.active());

  const startRun = (entry: JournalEntry, spans: RunSpans): Span => {
    const span = tracer.startSpan(
      spans.agent ? `invoke_agent ${spans.agent}` : "invoke_agent",
      {
        kind: api.SpanKind.INTERNAL,
        startTime: entry.at,
        attributes: { "gen_ai.operation.name": "invoke_agent", "tether.run.id": entry.runId, ...(spans.agent ? { "gen_ai.agent.name": spans.agent } : {}) },
        ...(spans.previous ? { links: [{ context: spans.previous, attributes: { "tether.link": "resumed_from" } }] } : {}),
      },
      api.ROOT_CONTEXT,
    );
    spans.run = span;
    if (!spans.agent && store) {
      void store.getRun(entry.runId).then(
        (run) => {
          if (!run || spans.run !== span) return;
          spans.agent = run.agent;
          span.updateName(`invoke_agent ${run.agent}`);
          span.setAttribute("gen_ai.agent.name", run.agent);
        },
        () => undefined,
      );
    }
    return span;
  };

  const endRun = (spans: RunSpans, at: number, status: string, failed: boolean): void => {
    for (const span of spans.calls.values()) endSpan(span, at, { "tether.call.outcome": "interrupted" }, undefined);
    spans.calls.clear();
    for (const span of spans.compensations.values()) endSpan(span, at, {}, undefined);
    spans.compensations.clear();
    if (!spans.run) return;
    spans.run.setAttribute("tether.run.status", status);
    if (failed) spans.run.setStatus({ code: api.SpanStatusCode.ERROR, message: status });
    spans.run.end(at);
    spans.previous = spans.run.spanContext();
    spans.run = undefined;
  };

  const endSpan = (span: Span, at: number, attributes: Record<string, string | number | boolean | string[]>, error: string | undefined): void => {
    span.setAttributes(attributes);
    if (error !== undefined) {
      span.setAttribute("error.type", error);
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
    }
    span.end(at);
  };

  const usageAttributes = (data: JsonObject): Record<string, number> => {
    const usage = data.usage as { inputTokens?: unknown; outputTokens?: unknown } | undefined;
    const out: Record<string, number> = {};
    if (typeof usage?.inputTokens === "number") out["gen_ai.usage.input_tokens"] = usage.inputTokens;
    if (typeof usage?.outputTokens === "number") out["gen_ai.usage.output_tokens"] = usage.outputTokens;
    return out;
  };

  // Only what starts execution here (creation, running, a call, undoing an effect) keeps a run in
  // `runs`; other entries (a command written for a run another process executes) leave no state behind.
  const opens = new Set(["run.created", "status", "call.started", "compensation.started"]);
  const onEntry = (entry: JournalEntry): void => {
    const known = runs.get(entry.runId);
    if (!known && !opens.has(entry.type) && entry.type !== "control") return;
    // With no provider registered a span would record nothing: the run is left untracked, and
    // traced from its next call on if a provider is registered meanwhile.
    if (!known && !recording()) return;
    if (!known && entry.type === "status" && entry.data.to !== "running") return;
    const spans = known ?? (entry.type === "control" ? transient() : spansOf(entry.runId));
    const data = entry.data;
    switch (entry.type) {
      case "run.created":
        if (typeof data.agent === "string") spans.agent = data.agent;
        return;
      case "status": {
        const to = String(data.to);
        if (to === "running") {
          if (!spans.run) startRun(entry, spans);
        } else if (to === "paused" || to === "completed" || to === "cancelled" || to === "failed" || to === "halted") {
          endRun(spans, entry.at, to, to === "failed");
          if (to === "completed" || to === "cancelled" || to === "failed") runs.delete(entry.runId);
        }
        return;
      }
      case "call.started": {
        if (entry.callSeq === undefined) return;
        if (!spans.run) startRun(entry, spans);
        const name = String(data.name);
        const attributes: Record<string, string | number> = { "tether.run.id": entry.runId, "tether.call.seq": entry.callSeq };
        let span: Span;
        if (data.kind === "model") {
          const colon = name.indexOf(":");
          const provider = colon === -1 ? name : name.slice(0, colon);
          const model = colon === -1 ? name : name.slice(colon + 1);
          span = tracer.startSpan(
            `chat ${model}`,
            { kind: api.SpanKind.CLIENT, startTime: entry.at, attributes: { ...attributes, "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.system": provider, "gen_ai.request.model": model } },
            parentOf(spans),
          );
        } else {
          span = tracer.startSpan(
            `execute_tool ${name}`,
            {
              kind: api.SpanKind.INTERNAL,
              startTime: entry.at,
              attributes: {
                ...attributes,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
                ...(typeof data.toolCallId === "string" ? { "gen_ai.tool.call.id": data.toolCallId } : {}),
                ...(capture && data.input !== undefined ? { "gen_ai.tool.call.arguments": JSON.stringify(data.input) } : {}),
              },
            },
            parentOf(spans),
          );
        }
        spans.calls.get(entry.callSeq)?.end(entry.at);
        spans.calls.set(entry.callSeq, span);
        return;
      }
      case "call.completed":
      case "call.failed":
      case "call.aborted":
      case "call.uncertain": {
        const span = entry.callSeq === undefined ? undefined : spans.calls.get(entry.callSeq);
        if (!span || entry.callSeq === undefined) return;
        spans.calls.delete(entry.callSeq);
        const outcome = entry.type.slice("call.".length);
        const attributes: Record<string, string | number | boolean | string[]> = { "tether.call.outcome": outcome, ...usageAttributes(data) };
        if (typeof data.finishReason === "string") attributes["gen_ai.response.finish_reasons"] = [data.finishReason];
        if (entry.type === "call.aborted") attributes["tether.call.abort_reason"] = String(data.reason ?? "aborted");
        const error = entry.type === "call.failed" ? String(data.error ?? "error") : entry.type === "call.uncertain" ? "uncertain_effect" : undefined;
        endSpan(span, entry.at, attributes, error);
        return;
      }
      case "compensation.started": {
        if (entry.callSeq === undefined) return;
        const tool = String(data.tool);
        const span = tracer.startSpan(
          `compensate ${tool}`,
          { kind: api.SpanKind.INTERNAL, startTime: entry.at, attributes: { "tether.run.id": entry.runId, "tether.call.seq": entry.callSeq, "gen_ai.tool.name": tool, "tether.compensation.attempt": Number(data.attempt ?? 1) } },
          parentOf(spans),
        );
        spans.compensations.set(entry.callSeq, span);
        return;
      }
      case "compensation.succeeded":
      case "compensation.failed": {
        const span = entry.callSeq === undefined ? undefined : spans.compensations.get(entry.callSeq);
        if (!span || entry.callSeq === undefined) return;
        spans.compensations.delete(entry.callSeq);
        endSpan(span, entry.at, { "tether.compensation.outcome": entry.type === "compensation.succeeded" ? "succeeded" : "failed" }, entry.type === "compensation.failed" ? "compensation_failed" : undefined);
        return;
      }
      case "control": {
        const command = String(data.command);
        const span = tracer.startSpan(
          `control ${command}`,
          {
            kind: api.SpanKind.INTERNAL,
            startTime: entry.at,
            attributes: {
              "tether.run.id": entry.runId,
              "tether.control.command": command,
              ...(typeof data.actor === "string" ? { "tether.control.actor": data.actor } : {}),
              ...(typeof data.outcome === "string" ? { "tether.control.outcome": data.outcome } : {}),
              ...(capture && typeof data.reason === "string" ? { "tether.control.reason": data.reason } : {}),
            },
            ...(!spans.run && spans.previous ? { links: [{ context: spans.previous }] } : {}),
          },
          parentOf(spans),
        );
        span.end(entry.at);
        return;
      }
      default:
        return;
    }
  };

  const unsubscribe = runtime.bus.subscribeJournal((entry) => {
    try {
      onEntry(entry);
    } catch {
      // Tracing never breaks a run.
    }
  });
  return () => {
    unsubscribe();
    const now = Date.now();
    for (const spans of runs.values()) endRun(spans, now, "untraced", false);
    runs.clear();
  };
}
