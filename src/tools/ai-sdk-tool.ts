import type { asSchema } from "ai";
import { z } from "zod";
import type { Json } from "../engine/json.js";
import { optionalRequire } from "../engine/optional-import.js";
import { tool, type Tool, type ToolContext, type ToolDefinition } from "../engine/tool.js";
import { inputSchemaFromJsonSchema } from "./json-schema-input.js";

/** What an AI SDK tool's `execute` gets (the AI SDK's `ToolExecutionOptions`, as Tether fills it). */
export interface AiSdkToolExecutionOptions {
  toolCallId: string;
  messages: never[];
  abortSignal?: AbortSignal;
  experimental_context?: unknown;
}

/**
 * An AI SDK tool (`tool({ description, inputSchema, execute })` from `ai`): the members Tether
 * uses, as its own type so the published types do not import `ai`, an optional peer.
 */
export interface AiSdkTool<I, O> {
  description?: string;
  /** A zod schema, `jsonSchema(...)`, or any schema the AI SDK accepts. */
  inputSchema?: unknown;
  execute?(input: I, options: AiSdkToolExecutionOptions): AsyncIterable<O> | PromiseLike<O> | O;
  /** The AI SDK's own approval flag: always, or a predicate on the call's arguments. */
  needsApproval?: boolean | ((input: I, options: { toolCallId: string; messages: never[] }) => boolean | PromiseLike<boolean>);
}

/** What the AI SDK tool cannot say about itself: Tether's effect declarations. */
export type AiSdkToolDeclarations<I, O> = Partial<
  Pick<ToolDefinition<I, O>, "abortable" | "idempotent" | "check" | "compensate" | "revalidate" | "timeoutMs" | "output" | "needsApproval" | "approvalTtlMs" | "onApprovalTimeout">
>;

function isZodSchema(schema: unknown): schema is z.ZodType {
  return schema instanceof z.ZodType;
}

/**
 * Wraps an AI SDK `tool({ description, inputSchema, execute })` as a Tether tool. A zod (v4)
 * input schema is used as is; any other schema (`jsonSchema()`, zod 3, Standard Schema) is
 * validated through its JSON Schema. `execute` gets the call's AbortSignal as `abortSignal`;
 * declare `abortable: true` only if it honours it. A streaming `execute` (an async iterable)
 * yields its last value as the result. The tool's own `needsApproval` (a boolean or a predicate
 * on its arguments) is honoured: the run pauses for a person's approval before such a call.
 */
export function fromAiSdkTool<I, O>(name: string, aiTool: AiSdkTool<I, O>, declarations: AiSdkToolDeclarations<I, O> = {}): Tool<I, O> {
  const execute = aiTool.execute;
  if (typeof execute !== "function") throw new TypeError(`AI SDK tool ${name} has no execute function; Tether runs tools itself`);
  const declared = aiTool.inputSchema as unknown;
  let input: z.ZodType<I>;
  let jsonSchema: Json | undefined;
  if (isZodSchema(declared)) {
    input = declared as z.ZodType<I>;
  } else {
    const ai = optionalRequire<{ asSchema: typeof asSchema }>("ai", `the AI SDK tool ${name} (its input schema is not zod 4)`);
    const schema = ai.asSchema(aiTool.inputSchema as Parameters<typeof asSchema>[0]);
    const resolved = schema.jsonSchema;
    if (typeof (resolved as PromiseLike<unknown>).then === "function") throw new TypeError(`AI SDK tool ${name} has an asynchronous JSON Schema; give it a synchronous one`);
    jsonSchema = resolved as Json;
    input = inputSchemaFromJsonSchema(jsonSchema).schema as unknown as z.ZodType<I>;
  }
  const aiNeedsApproval = aiTool.needsApproval;
  const needsApproval: ToolDefinition<I, O>["needsApproval"] =
    declarations.needsApproval ??
    (typeof aiNeedsApproval === "function"
      ? async (value: I) => (await aiNeedsApproval(value as never, { toolCallId: "", messages: [] })) === true
      : aiNeedsApproval);
  const wrapped = tool<I, O>({
    ...declarations,
    ...(needsApproval !== undefined ? { needsApproval } : {}),
    name,
    description: aiTool.description ?? name,
    input,
    execute: async (value: I, ctx: ToolContext) => {
      const options: AiSdkToolExecutionOptions = { toolCallId: ctx.idempotencyKey, messages: [], abortSignal: ctx.signal, experimental_context: { runId: ctx.runId, idempotencyKey: ctx.idempotencyKey } };
      const result = execute.call(aiTool, value, options);
      if (isAsyncIterable<O>(result)) {
        let last: O | undefined;
        for await (const item of result) last = item;
        return last as O;
      }
      return result;
    },
  });
  return jsonSchema === undefined ? wrapped : { ...wrapped, spec: { ...wrapped.spec, inputSchema: jsonSchema } };
}

function isAsyncIterable<T>(value: unknown): value is AsyncIterable<T> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
