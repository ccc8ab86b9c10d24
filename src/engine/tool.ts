import { z } from "zod";
import type { Json } from "./json.js";
import type { ToolSpec } from "./model.js";

export interface ToolContext {
  runId: string;
  /** Deterministic per call (run id + call sequence); the same on a retry after a crash. */
  idempotencyKey: string;
  /** Fires on an immediate pause, cancel, halt or timeout. Honour it if the tool is `abortable`. */
  signal: AbortSignal;
  /**
   * The lease's fencing epoch this call runs under; it grows each time a worker takes the run.
   * A worker frozen mid-call (a long GC pause, SIGSTOP) may finish that call after another worker
   * took the run over: Tether refuses its writes, but only the outside service can refuse its
   * side effect. Pass this (with the idempotency key) to a service that keeps the highest token
   * it has seen per key and refuses lower ones.
   */
  fencingToken: number;
  /**
   * Reports progress, journaled as `call.progress` (MCP progress notifications arrive here).
   * A command's output comes as `message` with its `stream`, `progress` counting its bytes.
   */
  progress(update: { progress: number; total?: number; message?: string; stream?: "stdout" | "stderr" }): void;
  /** A resource the run holds, by name. */
  resource<T = unknown>(name: string): T;
}

export interface CompensationContext {
  runId: string;
  /** Stable for the effect's compensation; the same if compensation is retried after a crash. */
  idempotencyKey: string;
  signal: AbortSignal;
  attempt: number;
  resource<T = unknown>(name: string): T | undefined;
}

export type CheckResult<O> = { done: true; result: O } | { done: false };

export interface ToolDefinition<I = unknown, O = unknown> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  output?: z.ZodType<O>;
  execute(input: I, ctx: ToolContext): Promise<O> | O;
  /** Undo the effect when the run is cancelled. Receives what the call returned. */
  compensate?(input: I, result: O, ctx: CompensationContext): Promise<void> | void;
  /** Safe to retry with the same idempotency key after a crash. */
  idempotent?: boolean;
  /** Ask the world whether the call with this key already happened. */
  check?(idempotencyKey: string, input: I): Promise<CheckResult<O>> | CheckResult<O>;
  /** Honours its AbortSignal: an immediate pause or cancel stops it mid-call. */
  abortable?: boolean;
  /** Is the world still as this effect left it? Return a reason string if not. */
  revalidate?(input: I, result: O): Promise<true | string> | true | string;
  timeoutMs?: number;
  /**
   * A person approves each call before it starts: always (`true`), or when this returns true for
   * the call's arguments. The run pauses with `approval_required` until someone decides.
   */
  needsApproval?: boolean | ((input: I) => boolean | Promise<boolean>);
  /** How long an approval may wait; then `onApprovalTimeout` applies. Default: no deadline. */
  approvalTtlMs?: number;
  /** When `approvalTtlMs` passes: reject the call (default), or keep waiting and notify again. */
  onApprovalTimeout?: "reject" | "wait";
}

export interface Tool<I = unknown, O = unknown> extends ToolDefinition<I, O> {
  readonly kind: "tether-tool";
  readonly spec: ToolSpec;
}

export type AnyTool = Tool<any, any>;

export function tool<I, O>(definition: ToolDefinition<I, O>): Tool<I, O> {
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(definition.name)) {
    throw new TypeError(`tool name "${definition.name}" must be 1-64 letters, digits, "_" or "-"`);
  }
  if (definition.approvalTtlMs !== undefined && !(Number.isFinite(definition.approvalTtlMs) && definition.approvalTtlMs > 0)) {
    throw new TypeError(`tool ${definition.name}: approvalTtlMs must be a positive number of milliseconds`);
  }
  const inputSchema = z.toJSONSchema(definition.input, { unrepresentable: "any" }) as Json;
  return {
    ...definition,
    kind: "tether-tool",
    spec: { name: definition.name, description: definition.description, inputSchema },
  };
}

export function isCompensable(t: AnyTool): boolean {
  return typeof t.compensate === "function";
}
