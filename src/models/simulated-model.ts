import { z } from "zod";
import { systemClock, type Clock } from "../engine/clock.js";
import { ModelCallError } from "../engine/errors.js";
import type { Json } from "../engine/json.js";
import type { ModelCallOptions, ModelRequest, ModelStreamPart, TetherModel, ToolSpec } from "../engine/model.js";
import type { Message } from "../engine/state.js";
import { hashString, seededRandom, type Random } from "./seeded-random.js";
import { sampleFromSchema } from "./schema-sample.js";
import { pacerFor } from "./token-pacer.js";
import { paragraph } from "./simulated-text.js";

/** One assistant turn: its text, and the tool calls it asks for (none: the agent's final answer). */
export interface SimulatedTurn {
  text: string;
  toolCalls?: { toolName: string; input: Json }[];
}

export interface ScriptContext {
  request: ModelRequest;
  /** How many assistant turns the conversation already has. */
  turn: number;
  random: Random;
  /** The last user message (the task, or a person's steering). */
  lastUserMessage: string | undefined;
  /** Results of the tool calls of the previous turn. */
  lastToolResults: Extract<Message, { role: "tool" }>[];
}

/** Decides the next assistant turn; pure, so a given conversation always gets the same turn. */
export type SimulatedScript = (context: ScriptContext) => SimulatedTurn;

export interface SimulatedModelOptions {
  seed?: number;
  /** Streaming speed; `Infinity` streams without waiting. Default 40. */
  tokensPerSecond?: number;
  /**
   * What it answers: the turns in order (the n-th model call of a run, counted by the assistant
   * turns its conversation holds, answers with the n-th; a call past the last fails with
   * `model_error`), or a function from the conversation to the next turn. Default: `genericScript(rounds)`.
   */
  script?: SimulatedScript | readonly SimulatedTurn[];
  modelId?: string;
  clock?: Clock;
  /** Tool-calling rounds of the default script before it answers. Default 3. */
  rounds?: number;
}

const tokenPattern = /\S{1,4}\s*|\s+/g;

/** Splits text into ~4-character tokens (a word or part of one, with its trailing space). */
export function tokenize(text: string): string[] {
  return text.match(tokenPattern) ?? [];
}

/**
 * The default script: a plan, then one tool call per turn (`rounds` of them; see `nextTool` for
 * which), then a final answer. Arguments come from the conversation where they can: a
 * text field named like a query (`query`, `q`, `topic`, `question`, `prompt`, `task`, `search`)
 * gets the task (refined with sampled words when the tool was called before); a field whose name another tool's earlier result has (`url`, `id`, …) gets that value,
 * newest result first; anything else is sampled from the schema with the seed. Each turn's text
 * says what the previous tools returned.
 */
export function genericScript(rounds: number): SimulatedScript {
  return ({ request, turn, random, lastUserMessage, lastToolResults }) => {
    const tools = request.tools;
    const task = (lastUserMessage ?? "the task").slice(0, 200);
    if (turn === 0) {
      const steps = tools.length ? tools.slice(0, 3).map((t, i) => `${i + 1}. Use ${t.name} to ${t.description.toLowerCase().replace(/\.$/, "")}.`) : ["1. Think it through."];
      return {
        text: `Plan for "${task.slice(0, 80)}":\n${steps.join("\n")}\n${paragraph(random, 1)}`,
        toolCalls: tools.length ? [callFor(nextTool(tools, request.messages, turn), random, task, new Map(), 0)] : [],
      };
    }
    const heard = lastToolResults.map((r) => `${r.toolName} ${r.isError ? "failed" : "returned"} ${preview(r.content)}.`).join(" ");
    if (turn < rounds && tools.length) {
      const next = nextTool(tools, request.messages, turn);
      const earlier = request.messages.filter((m) => m.role === "tool" && m.toolName === next.name).length;
      return { text: `${heard ? `${heard} ` : ""}${paragraph(random, 2)}`, toolCalls: [callFor(next, random, task, toolResultsOf(request.messages, next.name), earlier)] };
    }
    return { text: `Final answer: ${heard ? `${heard} ` : ""}${paragraph(random, 3)}` };
  };
}

const queryField = /^(query|q|search|topic|question|prompt|task|text)$/i;

/**
 * The tool of this turn: one not called yet, first one that an earlier result can feed (a
 * `fetch_page({ url })` after a `search` returned urls), else one that takes a query (the task),
 * else the first in the order listed; once each has been called, the list again in order.
 */
function nextTool(tools: readonly ToolSpec[], messages: readonly Message[], turn: number): ToolSpec {
  const called = new Set(messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.toolName) : [])));
  const fresh = tools.filter((t) => !called.has(t.name));
  if (!fresh.length) return tools[turn % tools.length];
  const fields = (t: ToolSpec) => Object.entries((t.inputSchema as { properties?: Record<string, Json> }).properties ?? {});
  const fed = fresh.find((t) => {
    const results = toolResultsOf(messages, t.name);
    return fields(t).some(([key, schema]) => results.has(key) && fits(results.get(key)!, schema));
  });
  return fed ?? fresh.find((t) => fields(t).some(([key, schema]) => queryField.test(key) && (schema as { type?: unknown } | null)?.type === "string")) ?? fresh[0];
}

/** Every field of the results of the other tools so far, newest first (a tool's own output is not its next input). */
function toolResultsOf(messages: readonly Message[], exceptTool: string): Map<string, Json> {
  const fields = new Map<string, Json>();
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== "tool" || m.isError || m.toolName === exceptTool) continue;
    collectFields(m.content, fields, 0);
  }
  return fields;
}

function collectFields(value: Json, into: Map<string, Json>, depth: number): void {
  if (depth > 2 || value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    for (const item of value) collectFields(item, into, depth + 1);
    return;
  }
  for (const [key, field] of Object.entries(value)) {
    if (!into.has(key) && field !== null && typeof field !== "object") into.set(key, field);
    collectFields(field, into, depth + 1);
  }
}

/** `earlier`: how many times the conversation already called this tool; a repeated query is refined, as a model would. */
function callFor(tool: ToolSpec, random: Random, task: string, results: Map<string, Json>, earlier: number): { toolName: string; input: Json } {
  const input = sampleFromSchema(tool.inputSchema, random);
  const properties = (tool.inputSchema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  if (input === null || typeof input !== "object" || Array.isArray(input)) return { toolName: tool.name, input };
  for (const key of Object.keys(input)) {
    const property = properties[key] as Json;
    const type = properties[key]?.type;
    const known = results.get(key);
    if (known !== undefined && (typeof known === type || (type === "integer" && Number.isInteger(known))) && fits(known, property)) input[key] = known;
    else if (type === "string" && queryField.test(key)) {
      const query = earlier === 0 ? task : `${task} (${String(input[key])})`;
      if (fits(query, property)) input[key] = query;
    }
  }
  return { toolName: tool.name, input };
}

const validators = new WeakMap<object, z.ZodType | null>();

/** Whether a value taken from the conversation is valid for the argument's schema (else the sampled one stays). */
function fits(value: Json, schema: Json): boolean {
  if (typeof schema !== "object" || schema === null) return true;
  let validator = validators.get(schema);
  if (validator === undefined) {
    try {
      validator = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
    } catch {
      validator = null;
    }
    validators.set(schema, validator);
  }
  return validator === null || validator.safeParse(value).success;
}

/** A script of exact turns: the n-th model call answers with `turns[n]`. */
export function scriptedTurns(turns: readonly SimulatedTurn[]): SimulatedScript {
  return ({ turn }) => {
    const next = turns[turn];
    if (next === undefined) {
      throw new ModelCallError(`the simulated model's script has ${turns.length} turn${turns.length === 1 ? "" : "s"} and this is model call ${turn + 1} of the run: add a turn, or end the last one without tool calls`, { model: "simulated", turn, turns: turns.length });
    }
    return structuredClone(next);
  };
}

function preview(content: Json): string {
  const text = typeof content === "string" ? content : JSON.stringify(content);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function countTokens(messages: readonly Message[]): number {
  let chars = 0;
  for (const m of messages) chars += typeof m.content === "string" ? m.content.length : JSON.stringify(m.content).length;
  return Math.ceil(chars / 4);
}

/**
 * The offline default model: streams a deterministic, realistic agent trace (a plan, tool calls
 * with arguments, prose) at a configurable token rate, and reports token usage. The same seed
 * and conversation always give the same turn, so an interrupted and re-issued call matches.
 */
export class SimulatedModel implements TetherModel {
  readonly specificationVersion = "tether-model-v1";
  readonly provider = "simulated";
  readonly modelId: string;
  private readonly seed: number;
  private readonly tokensPerSecond: number;
  private readonly script: SimulatedScript;
  private readonly clock: Clock;

  constructor(options: SimulatedModelOptions = {}) {
    this.seed = options.seed ?? 42;
    this.tokensPerSecond = options.tokensPerSecond ?? 40;
    const script = options.script ?? genericScript(options.rounds ?? 3);
    this.script = typeof script === "function" ? script : scriptedTurns(script);
    this.modelId = options.modelId ?? "sim-1";
    this.clock = options.clock ?? systemClock;
  }

  /** The turn this model gives for a request, without streaming it. */
  turnFor(request: ModelRequest): SimulatedTurn {
    const messages = request.messages;
    const turn = messages.filter((m) => m.role === "assistant").length;
    const lastUser = [...messages].reverse().find((m) => m.role === "user");
    const lastToolResults: Extract<Message, { role: "tool" }>[] = [];
    for (let i = messages.length - 1; i >= 0 && messages[i].role === "tool"; i--) lastToolResults.unshift(messages[i] as Extract<Message, { role: "tool" }>);
    const last = messages[messages.length - 1];
    const random = seededRandom(hashString(`${turn}|${messages.length}|${last ? JSON.stringify(last.content) : ""}`, this.seed));
    return this.script({ request, turn, random, lastUserMessage: lastUser?.content as string | undefined, lastToolResults });
  }

  stream(request: ModelRequest, options: ModelCallOptions): AsyncIterableIterator<ModelStreamPart> {
    const delayMs = Number.isFinite(this.tokensPerSecond) ? 1000 / this.tokensPerSecond : 0;
    return new PacedStream(() => this.planStream(request), delayMs, this.clock, options.signal);
  }

  /** The turn's stream: usage, then the text token by token, then the tool calls and finish. */
  private planStream(request: ModelRequest): PlannedStream {
    const turn = this.turnFor(request);
    const inputTokens = countTokens(request.messages);
    const text = turn.text;
    let outputTokens = tokenize(text).length;
    const tail: ModelStreamPart[] = [];
    const calls = turn.toolCalls ?? [];
    for (let i = 0; i < calls.length; i++) {
      outputTokens += Math.ceil(JSON.stringify(calls[i].input).length / 4) + 2;
      tail.push({ type: "tool-call", toolCall: { toolCallId: `call_${hashString(`${request.messages.length}|${i}|${calls[i].toolName}`, this.seed).toString(36)}`, toolName: calls[i].toolName, input: calls[i].input } });
    }
    tail.push({ type: "finish", finishReason: calls.length ? "tool-calls" : "stop", usage: { inputTokens, outputTokens } });
    return { head: [{ type: "usage", usage: { inputTokens, outputTokens: 0 } }], text, tail };
  }
}

/**
 * A turn's stream as planned: its text is cut into tokens as they are read, not all up front. A
 * thousand streams that each held a part object and a string per token, for the seconds a turn
 * takes to stream, filled every young-generation collection with objects to copy.
 */
interface PlannedStream {
  /** The parts before the text. */
  head: ModelStreamPart[];
  text: string;
  /** The parts after it. */
  tail: ModelStreamPart[];
}

/** What a stream that ended (read to its end, returned, aborted or failed) has left: nothing. */
const ended: PlannedStream = { head: [], text: "", tail: [] };

/**
 * The simulated stream: the n-th text token due n·`delayMs` after the first read, the other
 * parts at once. Tokens keep the model's pace whatever the reader does, as a provider's do: a
 * reader that falls behind finds the tokens already due waiting, and reads them without a wait.
 * An iterator written out rather than an async generator, with one abort listener for the whole
 * stream and the waits on a shared `TokenPacer`: a thousand streams at 100 tokens/s are a
 * hundred thousand parts a second, and a generator's extra promise hops, a listener per token
 * and a timer per token were most of what a step cost the benchmark's worker. An abort rejects
 * the pending part at once.
 */
class PacedStream implements AsyncIterableIterator<ModelStreamPart> {
  private planned: PlannedStream | undefined;
  /** Where the stream is: the next part of the head, the next token of the text (its `lastIndex`), the next part of the tail. */
  private headAt = 0;
  private readonly tokenAt = new RegExp(tokenPattern.source, "g");
  private tailAt = 0;
  private rejectPending: ((reason: unknown) => void) | undefined;
  private readonly onAbort = () => {
    this.aborted = true;
    this.rejectPending?.(this.signal.reason);
  };
  private aborted = false;
  private listening = false;
  private startedAt = 0;
  private tokens = 0;

  constructor(
    private readonly plan: () => PlannedStream,
    private readonly delayMs: number,
    private readonly clock: Clock,
    private readonly signal: AbortSignal,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<ModelStreamPart>> {
    if (!this.planned) {
      // Planned on the first read, as a generator would: a script that throws fails the read.
      if (this.signal.aborted) return this.finish(Promise.reject(this.signal.reason));
      try {
        this.planned = this.plan();
      } catch (error) {
        return this.finish(Promise.reject(error));
      }
      this.startedAt = this.clock.now();
      this.listening = true;
      this.signal.addEventListener("abort", this.onAbort, { once: true });
    }
    // The abort listener's flag, not `signal.aborted` (a getter that validates its receiver), on every part.
    if (this.aborted) return this.finish(Promise.reject(this.signal.reason));
    const part = this.nextPart(this.planned);
    if (part === undefined) return this.finish(Promise.resolve({ done: true, value: undefined }));
    if (part.type !== "text-delta" || this.delayMs <= 0) return Promise.resolve({ done: false, value: part });
    this.tokens += 1;
    const due = this.startedAt + this.tokens * this.delayMs;
    if (due <= this.clock.now()) return Promise.resolve({ done: false, value: part });
    return new Promise((resolve, reject) => {
      this.rejectPending = reject;
      pacerFor(this.clock).at(due, () => {
        if (this.rejectPending !== reject) return;
        this.rejectPending = undefined;
        if (this.aborted) reject(this.signal.reason);
        else resolve({ done: false, value: part });
      });
    });
  }

  private nextPart(planned: PlannedStream): ModelStreamPart | undefined {
    if (this.headAt < planned.head.length) return planned.head[this.headAt++];
    if (this.tokenAt.lastIndex < planned.text.length) {
      // Every character is in some token (`tokenPattern` takes any run of spaces or not), so the
      // match starts where the last ended; `test` moves `lastIndex` past it without building the
      // match array `exec` would: a fifth of what the stream allocated per token.
      const from = this.tokenAt.lastIndex;
      this.tokenAt.test(planned.text);
      return { type: "text-delta", text: planned.text.slice(from, this.tokenAt.lastIndex) };
    }
    return planned.tail[this.tailAt++];
  }

  return(): Promise<IteratorResult<ModelStreamPart>> {
    return this.finish(Promise.resolve({ done: true, value: undefined }));
  }

  private finish<T>(result: Promise<T>): Promise<T> {
    this.planned = ended;
    if (this.listening) this.signal.removeEventListener("abort", this.onAbort);
    this.listening = false;
    return result;
  }
}
