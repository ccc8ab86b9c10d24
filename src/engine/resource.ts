import type { Json } from "./json.js";

export interface ResourceContext {
  runId: string;
  signal: AbortSignal;
  /** What a previous acquire recorded, if the run held this resource before (a crash, a pause). */
  previous: Json | undefined;
}

/**
 * Something held across calls: a lock, a browser context, a provider session. `acquire` returns
 * a live handle and `record` a JSON description of it that is stored, so a process that never
 * saw the handle (after a crash) can still release it.
 */
export interface ResourceDefinition<H = unknown> {
  name: string;
  acquire(ctx: ResourceContext): Promise<H> | H;
  record?(handle: H): Json;
  release(handle: H | undefined, record: Json): Promise<void> | void;
  /** Released when the run pauses and acquired again on resume. */
  releaseOnPause?: boolean;
  /** Is the resource still as the run left it? Return a reason string if not. */
  revalidate?(record: Json): Promise<true | string> | true | string;
}

export type AnyResource = ResourceDefinition<any>;

export function resource<H>(definition: ResourceDefinition<H>): ResourceDefinition<H> {
  return definition;
}
