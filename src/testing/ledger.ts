import { systemClock } from "../engine/clock.js";
import { z } from "zod";
import type { Json } from "../engine/json.js";
import { tool, type Tool } from "../engine/tool.js";

/**
 * The outside world as a test sees it: every execution and compensation an effect tool
 * performed, by idempotency key. Assertions read it to prove what happened exactly once.
 */
export class Ledger {
  readonly executions: { tool: string; key: string; input: EffectInput }[] = [];
  /** Effects that happened, by idempotency key: what `check` answers from. */
  readonly effects = new Map<string, Json>();
  readonly compensations: { tool: string; key: string; input: EffectInput; attempt: number; ok: boolean }[] = [];

  executionsOf(tool: string): number {
    return this.executions.filter((e) => e.tool === tool).length;
  }

  keysOf(tool: string): string[] {
    return this.executions.filter((e) => e.tool === tool).map((e) => e.key);
  }

  compensationsOf(tool: string): number {
    return this.compensations.filter((c) => c.tool === tool).length;
  }
}

export const effectInput = z.object({ id: z.string() });
export type EffectInput = z.infer<typeof effectInput>;
export interface EffectResult {
  id: string;
  key: string;
}

export interface EffectToolOptions {
  name: string;
  ledger: Ledger;
  /** How long `execute` takes once the effect happened. Default 0. */
  durationMs?: number;
  idempotent?: boolean;
  /** Declares `check`, answered from the ledger. */
  checkable?: boolean;
  /** Honours the signal: an immediate pause or cancel stops the wait. */
  abortable?: boolean;
  /** Declares `compensate`. */
  compensable?: boolean;
  /** The first this many compensate attempts fail (Infinity: every one). */
  failingCompensations?: number;
  /** Runs inside `execute` before the effect happens; a test holds a call here to simulate a crash. */
  beforeEffect?: (key: string, execution: number) => Promise<void> | void;
  /** Runs inside `execute` after the effect happened, before it returns. */
  afterEffect?: (key: string, execution: number) => Promise<void> | void;
  /** Runs inside `compensate` before the undo happens. */
  beforeCompensate?: (key: string, attempt: number) => Promise<void> | void;
  /** Declares `revalidate` with this verdict. */
  revalidate?: (input: EffectInput, result: EffectResult) => true | string;
}

const wait = (ms: number, signal: AbortSignal | undefined): Promise<void> => systemClock.sleep(ms, signal);

/** A tool with a side effect recorded in a `Ledger`, declaring the effect contracts a test asks for. */
export function effectTool(options: EffectToolOptions): Tool<EffectInput, EffectResult> {
  const { ledger, name } = options;
  let compensateAttempts = 0;
  return tool<EffectInput, EffectResult>({
    name,
    description: `Performs the ${name} effect`,
    input: effectInput,
    idempotent: options.idempotent,
    abortable: options.abortable,
    async execute(input, ctx) {
      ledger.executions.push({ tool: name, key: ctx.idempotencyKey, input });
      const execution = ledger.executionsOf(name);
      await options.beforeEffect?.(ctx.idempotencyKey, execution);
      const result: EffectResult = { id: input.id, key: ctx.idempotencyKey };
      ledger.effects.set(ctx.idempotencyKey, result as unknown as Json);
      await options.afterEffect?.(ctx.idempotencyKey, execution);
      if (options.durationMs) await wait(options.durationMs, options.abortable ? ctx.signal : undefined);
      return result;
    },
    ...(options.checkable
      ? {
          check: (key: string) => {
            const done = ledger.effects.get(key);
            return done === undefined ? { done: false as const } : { done: true as const, result: done as unknown as EffectResult };
          },
        }
      : {}),
    ...(options.compensable
      ? {
          compensate: async (input: EffectInput, _result: EffectResult, ctx: { idempotencyKey: string; attempt: number }) => {
            await options.beforeCompensate?.(ctx.idempotencyKey, ctx.attempt);
            compensateAttempts += 1;
            const ok = compensateAttempts > (options.failingCompensations ?? 0);
            ledger.compensations.push({ tool: name, key: ctx.idempotencyKey, input, attempt: ctx.attempt, ok });
            if (!ok) throw new Error(`${name} could not be undone (attempt ${ctx.attempt})`);
          },
        }
      : {}),
    ...(options.revalidate ? { revalidate: options.revalidate } : {}),
  });
}
