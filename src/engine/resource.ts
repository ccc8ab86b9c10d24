import type { Json } from "./json.js";

export interface ResourceContext {
  runId: string;
  signal: AbortSignal;
  /**
   * What a previous acquire recorded, if the run still holds this resource: after a crash, a
   * takeover by another worker, or a pause that kept it. Undefined for a first acquire, and for
   * one after a pause that released it (`releaseOnPause`): there is nothing to re-attach to.
   */
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
  /**
   * Frees what this process holds for a live handle of a run that another process now executes
   * (it took the run over when this worker's lease lapsed, or resumed it after a pause), or that
   * ended elsewhere, or when this runtime closes: close a connection, kill a browser this process
   * started. Never what `record` names (a lock, a remote session): the run's next holder takes
   * that over with `acquire`'s `previous`, and releases it. Optional: without it the handle is
   * dropped as it is. Errors are ignored.
   */
  abandon?(handle: H): Promise<void> | void;
  /** Released when the run pauses and acquired again on resume. */
  releaseOnPause?: boolean;
  /** Is the resource still as the run left it? Return a reason string if not. */
  revalidate?(record: Json): Promise<true | string> | true | string;
}

export type AnyResource = ResourceDefinition<any>;

export function resource<H>(definition: ResourceDefinition<H>): ResourceDefinition<H> {
  return definition;
}
