import type { JournalInput, HeldResource } from "./store.js";
import type { AnyResource } from "./resource.js";
import type { Clock } from "./clock.js";

export interface ResourceChange {
  resources: Record<string, HeldResource>;
  journal: JournalInput;
  failed?: { name: string; error: string };
}

/** How long `abandon` waits for a resource's hook. */
const abandonTimeoutMs = 10_000;

/**
 * The live handles of a run's resources in this process. Their records live in the run, so
 * another process can release what this one acquired.
 */
export class ResourceHolder {
  private readonly handles = new Map<string, unknown>();

  constructor(
    private readonly runId: string,
    private readonly definitions: readonly AnyResource[],
    private readonly clock: Clock,
  ) {}

  get(name: string): unknown {
    if (!this.handles.has(name)) throw new Error(`resource "${name}" is not held by run ${this.runId}`);
    return this.handles.get(name);
  }

  /** Whether any live handle is held in this process. */
  get holdsAny(): boolean {
    return this.handles.size > 0;
  }

  peek(name: string): unknown {
    return this.handles.get(name);
  }

  /** Acquires, one by one, each declared resource this process does not hold live. */
  async *acquireMissing(held: Record<string, HeldResource>, signal: AbortSignal): AsyncGenerator<ResourceChange> {
    let resources = held;
    for (const definition of this.definitions) {
      const current = resources[definition.name];
      if (this.handles.has(definition.name) && current && !current.releasedForPause) continue;
      // Released for a pause: nothing is held to re-attach to, so the acquire starts afresh.
      const handle = await definition.acquire({ runId: this.runId, signal, previous: current?.releasedForPause ? undefined : current?.record });
      this.handles.set(definition.name, handle);
      const record = definition.record ? definition.record(handle) : null;
      const at = this.clock.now();
      resources = { ...resources, [definition.name]: { record, acquiredAt: at } };
      yield { resources, journal: { type: "resource.acquired", at, data: { name: definition.name, record, reacquired: current !== undefined } } };
    }
  }

  /**
   * Lets go of every live handle without releasing what the records name (see
   * `ResourceDefinition.abandon`): the run is no longer this process's. The names abandoned.
   */
  async abandon(): Promise<string[]> {
    const names = [...this.handles.keys()];
    for (const name of names) {
      const handle = this.handles.get(name);
      this.handles.delete(name);
      const definition = this.definitions.find((d) => d.name === name);
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        // A hook that hangs holds nothing up (a runtime's close waits for these) past its bound.
        await Promise.race([definition?.abandon?.(handle), new Promise((resolve) => (timer = setTimeout(resolve, abandonTimeoutMs)))]);
      } catch {
        // The handle is let go either way; the record still names what the next holder takes over.
      } finally {
        clearTimeout(timer);
      }
    }
    return names;
  }

  /** Whether a pause has anything to release: a held resource marked `releaseOnPause`, not released for a pause yet. */
  releasesOnPause(held: Record<string, HeldResource>): boolean {
    return Object.entries(held).some(([name, entry]) => !entry.releasedForPause && this.definitions.some((d) => d.name === name && d.releaseOnPause));
  }

  /** Releases held resources, newest first; for a pause only those marked `releaseOnPause`. */
  async *release(held: Record<string, HeldResource>, options: { forPause: boolean }): AsyncGenerator<ResourceChange> {
    let resources = held;
    // Keys are in acquisition order; reversing first keeps newest-first for ties in the same millisecond.
    const names = Object.keys(held)
      .reverse()
      .sort((a, b) => held[b].acquiredAt - held[a].acquiredAt);
    for (const name of names) {
      const entry = resources[name];
      if (entry.releasedForPause) {
        if (options.forPause) continue;
        const { [name]: _, ...rest } = resources;
        resources = rest;
        continue;
      }
      const definition = this.definitions.find((d) => d.name === name);
      if (options.forPause && !definition?.releaseOnPause) continue;
      const at = () => this.clock.now();
      try {
        if (!definition) throw new Error(`the agent no longer declares resource "${name}"`);
        await definition.release(this.handles.get(name), entry.record);
        this.handles.delete(name);
        if (options.forPause) resources = { ...resources, [name]: { ...entry, releasedForPause: true } };
        else {
          const { [name]: _, ...rest } = resources;
          resources = rest;
        }
        yield { resources, journal: { type: "resource.released", at: at(), data: { name, forPause: options.forPause } } };
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        yield {
          resources,
          journal: { type: "resource.release_failed", at: at(), data: { name, error: message } },
          failed: { name, error: message },
        };
      }
    }
  }
}
