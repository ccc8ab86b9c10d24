import type { Context } from "hono";
import { z } from "zod";
import { InvalidInputError } from "../engine/errors.js";
import { runStatuses, type RunStatus } from "../engine/status.js";

/** Zod issues as one line a person can act on: `field: problem; field: problem`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => {
      const path = issue.path.map(String).join(".");
      if (issue.code === "unrecognized_keys") {
        const fields = issue.keys.map((k) => `"${path ? `${path}.` : ""}${k}"`).join(", ");
        return `unknown field${issue.keys.length > 1 ? "s" : ""} ${fields}`;
      }
      return `${path || "(body)"}: ${issue.message}`;
    })
    .join("; ");
}

/** How deep a request body's JSON may nest: deeper is refused before it is parsed or walked. */
export const maxJsonDepth = 64;

/** The deepest nesting of arrays and objects in a JSON text (strings skipped); stops counting past `limit`. */
export function jsonDepth(text: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92) i++;
      else if (ch === 34) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 91 || ch === 123) {
      depth++;
      if (depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (ch === 93 || ch === 125) depth--;
  }
  return deepest;
}

/** The request body as JSON checked by `schema`; an empty body counts as `{}`. */
export async function readBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const text = await c.req.text();
  let value: unknown = {};
  if (jsonDepth(text, maxJsonDepth) > maxJsonDepth) throw new InvalidInputError(`the request body nests JSON more than ${maxJsonDepth} levels deep`);
  if (text.trim() !== "") {
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new InvalidInputError(`the request body is not valid JSON (${error instanceof Error ? error.message : String(error)})`);
    }
  }
  return parseWith(schema, value, "body");
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message }));
    throw new InvalidInputError(`invalid ${what}: ${describeIssues(parsed.error.issues)}`, issues);
  }
  return parsed.data;
}

export const budgetsSchema = z.strictObject({
  maxTokens: z.number().int().positive().optional(),
  maxCostUsd: z.number().positive().optional(),
  maxSteps: z.number().int().positive().optional(),
  maxWallTimeMs: z.number().int().positive().optional(),
  maxRepeatedToolCalls: z.number().int().positive().optional(),
  maxConsecutiveFailures: z.number().int().positive().optional(),
});

const reason = z.string().max(2_000).optional();

export const startBodySchema = z.strictObject({
  agent: z.string().min(1).max(64),
  input: z.json(),
  budgets: budgetsSchema.optional(),
  model: z.string().min(1).max(500).optional(),
});

export const pauseBodySchema = z.strictObject({
  reason,
  mode: z.enum(["immediate", "boundary"]).optional(),
});

const resolveAction = z.enum(["retry", "skip", "done"]);

export const resumeBodySchema = z.strictObject({
  reason,
  message: z.string().optional(),
  patch: z.unknown().optional(),
  force: z.boolean().optional(),
  resolve: z.union([resolveAction, z.strictObject({ action: resolveAction, result: z.json().optional(), noResult: z.boolean().optional() })]).optional(),
  budgets: budgetsSchema.optional(),
});

export const cancelBodySchema = z.strictObject({
  reason,
  /** What to do with effects a live fork inherited: undo them anyway, or keep them for the forks. */
  inherited: z.enum(["compensate", "keep"]).optional(),
});

export const editStateBodySchema = z
  .strictObject({
    message: z.string().optional(),
    patch: z.unknown().optional(),
  })
  .refine((body) => body.message !== undefined || body.patch !== undefined, { message: "give a message, a patch, or both" });

export const forkBodySchema = z.strictObject({ fromStep: z.number().int().min(0), currentVersion: z.boolean().optional() });

export const approveBodySchema = z.strictObject({
  callSeq: z.number().int().min(1).optional(),
  input: z.json().optional(),
  note: z.string().max(10_000).optional(),
});

export const rejectBodySchema = z.strictObject({
  callSeq: z.number().int().min(1).optional(),
  note: z.string().trim().min(1, "a rejection needs a note: the agent receives it as the call's result").max(10_000),
});

export const sayBodySchema = z.strictObject({ text: z.string().min(1).max(100_000) });

/** A prune: terminal runs last updated more than `olderThanMs` ago (or before `before`, ms since the epoch). */
export const pruneBodySchema = z
  .strictObject({
    olderThanMs: z.number().int().min(0).optional(),
    before: z.number().int().min(0).optional(),
    dryRun: z.boolean().optional(),
    batchSize: z.number().int().min(1).max(10_000).optional(),
  })
  .refine((body) => (body.olderThanMs === undefined) !== (body.before === undefined), { message: "give exactly one of olderThanMs and before" });

export const haltBodySchema = z.strictObject({
  reason: z.string().min(1).max(2_000),
  agent: z.string().min(1).max(64).optional(),
});

/** `?status=a,b`: every name must be a status. */
export function parseStatuses(value: string | undefined): RunStatus[] | undefined {
  if (value === undefined || value === "") return undefined;
  const names = value.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(runStatuses as readonly string[]).includes(n));
  if (unknown.length) throw new InvalidInputError(`unknown status ${unknown.join(", ")}; statuses: ${runStatuses.join(", ")}`);
  return names as RunStatus[];
}

/** A non-negative integer query parameter within bounds, or the default. */
/** `name` says where the value came from, as a person would: "the query parameter ?after", "the Last-Event-ID header". */
export function parseIntegerParam(name: string, value: string | undefined, options: { min: number; max: number; fallback?: number }): number | undefined {
  if (value === undefined || value === "") return options.fallback;
  const where = name.includes(" ") ? name : `the query parameter ?${name}`;
  const problem = `${where} must be an integer from ${options.min} to ${options.max}, got "${value.slice(0, 40)}"`;
  if (!/^\d+$/.test(value)) throw new InvalidInputError(problem);
  const number = Number(value);
  if (number < options.min || number > options.max) throw new InvalidInputError(problem);
  return number;
}

/**
 * The `Last-Event-ID` header: absent means "from the start" (or `?after`); present but empty is
 * refused, since a client that sends it meant to resume and would silently get everything again.
 */
export function lastEventIdHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === "") throw new InvalidInputError("the Last-Event-ID header is empty: send the id of the last event you received, or leave the header out to start from the beginning");
  return header.trim();
}

/** An event id: `<seq>` or `<seq>.<sub>` (a live part after journal entry `seq`). */
export function parseEventId(value: string, from: string): { seq: number; sub: number } {
  const match = /^(\d{1,15})(?:\.(\d{1,15}))?$/.exec(value.trim());
  if (!match) throw new InvalidInputError(`${from} must be an event id like "12" or "12.3", got "${value.slice(0, 40)}"`);
  return { seq: Number(match[1]), sub: match[2] === undefined ? 0 : Number(match[2]) };
}
