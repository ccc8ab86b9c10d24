import { z } from "zod";
import { errorCodes, type ErrorCode } from "../engine/errors.js";
import { runStatuses } from "../engine/status.js";
import { roles, type Role } from "./api-types.js";
import { httpStatusOf } from "./http-errors.js";
import { pruneBodySchema, approveBodySchema, rejectBodySchema, cancelBodySchema, editStateBodySchema, forkBodySchema, haltBodySchema, pauseBodySchema, resumeBodySchema, sayBodySchema, startBodySchema } from "./validation.js";

/**
 * The OpenAPI 3.1 description of the HTTP API, served at `GET /api/v1/openapi.json`. Request
 * bodies are the very zod schemas the routes validate with (converted by `z.toJSONSchema`), so
 * the document cannot drift from what the server accepts; a test checks that every route the
 * router answers is here and that the roles here are the ones the server enforces.
 */

interface QueryParam {
  name: string;
  description: string;
  schema: Record<string, unknown>;
}

export interface RouteDoc {
  method: "get" | "post" | "delete";
  /** In OpenAPI form: `/runs/{id}`. */
  path: string;
  summary: string;
  /** The least role allowed; "none" needs no token. */
  role: Role | "none";
  body?: z.ZodType;
  query?: QueryParam[];
  /** The success status and what it returns. */
  success: { status: 200 | 201 | 202; description: string; stream?: boolean };
  /** Error codes this route answers with, on top of the ones every route may give. */
  errors?: ErrorCode[];
}

const after: QueryParam = { name: "after", description: "resume after this event id (the Last-Event-ID header wins)", schema: { type: "string", pattern: "^\\d+(\\.\\d+)?$" } };

export const routeDocs: RouteDoc[] = [
  { method: "get", path: "/healthz", summary: "Is the server up, and which store it uses", role: "none", success: { status: 200, description: "{ ok, store, version }" } },
  { method: "get", path: "/whoami", summary: "The caller's actor name and role", role: "viewer", success: { status: 200, description: "{ actor, role }" } },
  { method: "get", path: "/agents", summary: "The agents this server can run", role: "viewer", success: { status: 200, description: "{ agents: [...] }" } },
  {
    method: "get",
    path: "/runs",
    summary: "List runs, newest first",
    role: "viewer",
    query: [
      { name: "status", description: "comma-separated statuses", schema: { type: "string", examples: ["paused,running"] } },
      { name: "agent", description: "only this agent's runs", schema: { type: "string" } },
      { name: "limit", description: "at most this many (1-1000, default 100)", schema: { type: "integer", minimum: 1, maximum: 1000 } },
    ],
    success: { status: 200, description: "{ runs: RunView[], damaged: [{ id, agent, status, code, message }] }: a matching run whose record fails its checksum is left out of runs and named in damaged" },
  },
  { method: "post", path: "/runs", summary: "Start a run", role: "operator", body: startBodySchema, success: { status: 201, description: "{ run: RunView }" }, errors: ["unknown_agent", "unknown_model", "halted"] },
  { method: "get", path: "/runs/{id}", summary: "One run", role: "viewer", success: { status: 200, description: "{ run: RunView }" }, errors: ["run_not_found"] },
  {
    method: "get",
    path: "/runs/{id}/journal",
    summary: "A page of the run's journal",
    role: "viewer",
    query: [
      { name: "after", description: "entries after this seq", schema: { type: "integer", minimum: 0 } },
      { name: "limit", description: "at most this many (1-5000, default 500)", schema: { type: "integer", minimum: 1, maximum: 5000 } },
    ],
    success: { status: 200, description: "{ entries, next }" },
    errors: ["run_not_found"],
  },
  { method: "get", path: "/runs/{id}/state", summary: "The run's state at its latest snapshot", role: "viewer", success: { status: 200, description: "{ state, snapshotAt, step }" }, errors: ["run_not_found", "snapshot_corrupt"] },
  { method: "get", path: "/runs/{id}/cancel-preview", summary: "What a cancel would compensate and release, and the live forks that inherited effects it would undo", role: "viewer", success: { status: 200, description: "{ compensations, resources, uncertain, forks, inherited }" }, errors: ["run_not_found"] },
  { method: "post", path: "/runs/{id}/pause", summary: "Pause a running run", role: "operator", body: pauseBodySchema, success: { status: 200, description: "{ run: RunView }" }, errors: ["run_not_found", "illegal_transition", "halted"] },
  {
    method: "post",
    path: "/runs/{id}/resume",
    summary: "Resume a paused run (the stale check runs first)",
    role: "operator",
    body: resumeBodySchema,
    success: { status: 200, description: "{ run: RunView }" },
    errors: ["run_not_found", "illegal_transition", "stale_snapshot", "snapshot_corrupt", "uncertain_effect", "invalid_state_patch", "halted", "approval_pending", "version_mismatch"],
  },
  { method: "post", path: "/runs/{id}/cancel", summary: "Cancel a run; its effects are compensated (inherited: compensate|keep when a live fork inherited some)", role: "operator", body: cancelBodySchema, success: { status: 200, description: "{ run: RunView }" }, errors: ["run_not_found", "illegal_transition", "fork_inherits_effects"] },
  { method: "post", path: "/runs/{id}/state", summary: "Edit a paused run's state: add a message, patch its vars", role: "operator", body: editStateBodySchema, success: { status: 200, description: "{ run: RunView }" }, errors: ["run_not_found", "illegal_transition", "halted", "invalid_state_patch"] },
  {
    method: "post",
    path: "/runs/{id}/messages",
    summary: "Send a message to a run without pausing it: the agent receives it before its next model call",
    role: "operator",
    body: sayBodySchema,
    success: { status: 202, description: "{ run: RunView, message: { id, text, actor, at } }" },
    errors: ["run_not_found", "illegal_transition", "invalid_state_patch"],
  },
  {
    method: "post",
    path: "/runs/{id}/approve",
    summary: "Approve a call waiting for approval (callSeq; without it, every call waiting), optionally with edited arguments; the run continues once no call waits",
    role: "operator",
    body: approveBodySchema,
    success: { status: 200, description: "{ run: RunView, decided: ApprovalRequest[] }" },
    errors: ["run_not_found", "no_pending_approval", "already_decided"],
  },
  {
    method: "post",
    path: "/runs/{id}/reject",
    summary: "Reject a call waiting for approval with a note: the agent receives it as the call's result",
    role: "operator",
    body: rejectBodySchema,
    success: { status: 200, description: "{ run: RunView, decided: ApprovalRequest[] }" },
    errors: ["run_not_found", "no_pending_approval", "already_decided"],
  },
  { method: "post", path: "/runs/{id}/fork", summary: "A new run from a step of this one", role: "operator", body: forkBodySchema, success: { status: 201, description: "{ run: RunView }" }, errors: ["run_not_found", "version_mismatch"] },
  { method: "get", path: "/runs/{id}/events", summary: "The run's journal and live model text as server-sent events", role: "viewer", query: [after], success: { status: 200, description: "text/event-stream: `journal` and `delta` events", stream: true }, errors: ["run_not_found"] },
  { method: "get", path: "/events", summary: "Every run's changes as server-sent events", role: "viewer", query: [{ ...after, description: "changes after this time (ms); the Last-Event-ID header wins" }], success: { status: 200, description: "text/event-stream: `run` events", stream: true } },
  { method: "get", path: "/runs/{id}/storage", summary: "What the run takes in the store: journal entries, messages, effects, commands and their bytes", role: "viewer", success: { status: 200, description: "{ storage }" }, errors: ["run_not_found"] },
  {
    method: "post",
    path: "/prune",
    summary: "Delete terminal runs (completed, failed, cancelled) last updated before a bound, with their journals, in batches; never a run that is not terminal",
    role: "admin",
    body: pruneBodySchema,
    success: { status: 200, description: "{ runs, journalEntries, messages, bytes, batches, before, dryRun }" },
  },
  { method: "get", path: "/halt", summary: "The halts in force", role: "viewer", success: { status: 200, description: "{ halts, runs: RunView[] (halted), damaged: [{ id, agent, status, code, message }] (halted runs whose record fails its checksum) }" } },
  { method: "post", path: "/halt", summary: "Halt every run, or one agent's (the kill switch)", role: "admin", body: haltBodySchema, success: { status: 200, description: "{ scope, halted, failed: [{ runId, code, message }] }: every run in scope is halted but those named in failed" } },
  {
    method: "delete",
    path: "/halt",
    summary: "Lift a halt; its runs wait paused (a run halted while cancelling goes on cancelling)",
    role: "admin",
    query: [
      { name: "agent", description: "lift this agent's halt (default: the global one)", schema: { type: "string" } },
      { name: "reason", description: "why, for the journal", schema: { type: "string" } },
    ],
    success: { status: 200, description: "{ scope, paused, cancelling, failed: [{ runId, code, message }] }" },
  },
  { method: "get", path: "/openapi.json", summary: "This document", role: "none", success: { status: 200, description: "the OpenAPI 3.1 document" } },
];

/** Answers any route may give: refused before routing, by auth, or by validation. */
// Codes only the HTTP client makes (it could not reach the server, or the answer was not the API's).
const clientOnlyCodes: readonly ErrorCode[] = ["unreachable", "http_error"];

const commonErrors: ErrorCode[] = ["invalid_input", "unauthorized", "forbidden", "host_refused", "origin_refused", "unsupported_media_type", "payload_too_large", "store_error"];


/**
 * A zod schema as an OpenAPI schema. Recursive parts (`z.json()`) come out of zod as `$defs` with
 * `#/$defs/…` references, which in OpenAPI resolve from the document's root: they move to
 * `components.schemas` under a name prefixed by the operation.
 */
function schemaOf(body: z.ZodType, prefix: string, components: Record<string, unknown>): Record<string, unknown> {
  const schema = z.toJSONSchema(body, { unrepresentable: "any", io: "input" }) as Record<string, unknown>;
  delete schema.$schema;
  const defs = (schema.$defs ?? {}) as Record<string, unknown>;
  delete schema.$defs;
  const rename = (name: string) => `${prefix}_${name.replace(/[^A-Za-z0-9_.-]/g, "")}`;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (value === null || typeof value !== "object") return value;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = key === "$ref" && typeof item === "string" && item.startsWith("#/$defs/") ? `#/components/schemas/${rename(item.slice("#/$defs/".length))}` : rewrite(item);
    }
    return out;
  };
  for (const [name, def] of Object.entries(defs)) components[rename(name)] = rewrite(def);
  return rewrite(schema) as Record<string, unknown>;
}

export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = {};
  for (const route of routeDocs) {
    const codes = [...new Set([...(route.role === "none" ? commonErrors.filter((c) => c !== "unauthorized" && c !== "forbidden") : commonErrors), ...(route.errors ?? [])])];
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of codes) byStatus.set(httpStatusOf(code), [...(byStatus.get(httpStatusOf(code)) ?? []), code]);
    const responses: Record<string, unknown> = {
      [route.success.status]: {
        description: route.success.description,
        content: route.success.stream ? { "text/event-stream": { schema: { type: "string" } } } : { "application/json": { schema: { type: "object" } } },
      },
    };
    for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
      responses[status] = { description: `error: ${list.join(", ")}`, content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
    }
    const parameters = [
      ...(route.path.includes("{id}") ? [{ name: "id", in: "path", required: true, description: "the run's id", schema: { type: "string" } }] : []),
      ...(route.query ?? []).map((q) => ({ name: q.name, in: "query", required: false, description: q.description, schema: q.schema })),
      ...(route.success.stream ? [{ name: "Last-Event-ID", in: "header", required: false, description: "the id of the last event received; resumes after it (never empty)", schema: { type: "string" } }] : []),
    ];
    const operationId = `${route.method}${route.path.replace(/[{}]/g, "").replace(/[/-](\w)/g, (_m, c: string) => c.toUpperCase()).replace(/\.json$/, "Json")}`;
    paths[route.path] ??= {};
    paths[route.path][route.method] = {
      summary: route.summary,
      operationId,
      ...(route.role === "none" ? { security: [] } : {}),
      "x-tether-role": route.role,
      ...(parameters.length ? { parameters } : {}),
      ...(route.body ? { requestBody: { required: false, content: { "application/json": { schema: schemaOf(route.body, operationId, schemas) } } } } : {}),
      responses,
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Tether HTTP API",
      version,
      description: `Pause, resume and cancel long-running AI agents. Roles, least to most: ${roles.join(" < ")}; each operation's x-tether-role is the least it needs. Run statuses: ${runStatuses.join(", ")}. Every error answers { error: { code, message, details? } }.`,
    },
    servers: [{ url: "/api/v1" }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "an API token (tether token create); never in the URL" } },
      schemas: {
        ...schemas,
        Error: {
          type: "object",
          required: ["error"],
          properties: {
            error: {
              type: "object",
              required: ["code", "message"],
              properties: {
                code: { type: "string", enum: errorCodes.filter((code) => !clientOnlyCodes.includes(code)) },
                message: { type: "string" },
                details: { type: "object", description: "what the code carries, one shape per code (ErrorDetails in the library; the table in docs/errors.md)" },
              },
            },
          },
        },
      },
    },
  };
}
