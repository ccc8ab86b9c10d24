import type { EngineContext } from "./engine-context.js";
import type { Json } from "./json.js";
import { statusEntry } from "./status-entry.js";
import type { CancelReport, EffectRecord, JournalInput, RunPatch, RunRecord, RunUpdate } from "./store.js";
import type { CompensationContext } from "./tool.js";

export interface CancellationHost {
  ctx: EngineContext;
  runId: string;
  /** How to undo an effect; undefined when the agent no longer declares one. */
  compensator(effect: EffectRecord): ((input: Json, result: Json, ctx: CompensationContext) => Promise<void> | void) | undefined;
  current(): RunRecord;
  write(update: Omit<RunUpdate, "runId">): Promise<boolean>;
  releaseResources(): Promise<{ released: string[]; failed: { name: string; error: string }[] }>;
  compensationResource(name: string): unknown;
  leavingRunning(): RunPatch;
  stopSignal: AbortSignal;
}

export function compensationKey(runId: string, callSeq: number): string {
  return `${runId}:${callSeq}:compensate`;
}

/** Effects still to undo, newest first. */
export function pendingCompensations(effects: readonly EffectRecord[]): EffectRecord[] {
  return effects.filter((e) => e.state === "done" || e.state === "compensating").sort((a, b) => b.callSeq - a.callSeq);
}

/** The forks each kept effect was kept for, as the cancel that chose `keep` recorded them. */
async function keptForks(ctx: EngineContext, runId: string): Promise<Map<number, string[]>> {
  const commands = await ctx.store.listCommands(runId);
  const choice = commands.filter((c) => c.type === "cancel" && c.payload.inherited === "keep").at(-1);
  const effects = Array.isArray(choice?.payload.inheritedEffects) ? choice.payload.inheritedEffects : [];
  const forks = new Map<number, string[]>();
  for (const effect of effects) {
    if (effect && typeof effect === "object" && !Array.isArray(effect) && typeof effect.callSeq === "number" && Array.isArray(effect.forks)) {
      forks.set(effect.callSeq, effect.forks.filter((f): f is string => typeof f === "string"));
    }
  }
  return forks;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An undo's final outcome: the effect compensated, or failed for a person to see. */
async function recordOutcome(host: CancellationHost, effect: EffectRecord, attempts: number, succeeded: boolean, lastError: string): Promise<void> {
  const at = host.ctx.clock.now();
  const entry: JournalInput = succeeded
    ? { type: "compensation.succeeded", at, callSeq: effect.callSeq, data: { tool: effect.tool, attempts } }
    : { type: "compensation.failed", at, callSeq: effect.callSeq, data: { tool: effect.tool, attempts, error: lastError, final: true } };
  await host.write({
    effects: [{ ...effect, state: succeeded ? "compensated" : "failed", attempts, error: succeeded ? null : lastError, updatedAt: at }],
    journal: [entry],
  });
}

/**
 * cancelling → cancelled: every completed effect with `compensate`, newest first, each once
 * (a crash mid-way continues here with the same idempotency key), retried with backoff and
 * bounded in time; then every held resource is released; then the report.
 */
export async function runCancellation(host: CancellationHost): Promise<void> {
  const { ctx, runId } = host;
  const { maxAttempts, backoffMs, timeoutMs } = ctx.compensation;
  const effects = pendingCompensations(await ctx.store.listEffects(runId));
  for (const effect of effects) {
    if (host.stopSignal.aborted || host.current().status !== "cancelling") return;
    const compensate = host.compensator(effect);
    let attempts = effect.attempts;
    // Attempts already made belong to a worker that stopped mid-way (a crash): if none are left,
    // that interrupted attempt is the failure to report.
    let lastError = !compensate
      ? `the agent no longer declares a compensate for ${effect.tool}`
      : attempts > 0
        ? `attempt ${attempts} was interrupted (the worker stopped) and its outcome is unknown`
        : "";
    let succeeded = false;
    while (compensate && attempts < maxAttempts && !succeeded) {
      if (attempts > 0) await ctx.clock.sleep(backoffMs * 2 ** Math.max(0, attempts - 1), host.stopSignal).catch(() => undefined);
      if (host.stopSignal.aborted) return;
      attempts += 1;
      const at = ctx.clock.now();
      await host.write({
        set: { waitingFor: { kind: "compensation", name: effect.tool, callSeq: effect.callSeq, since: at } },
        effects: [{ ...effect, state: "compensating", attempts, updatedAt: at }],
        journal: [{ type: "compensation.started", at, callSeq: effect.callSeq, data: { tool: effect.tool, attempt: attempts } }],
      });
      const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), host.stopSignal]);
      const undo = Promise.resolve().then(() =>
        compensate(effect.input, effect.result, {
          runId,
          idempotencyKey: compensationKey(runId, effect.callSeq),
          signal,
          attempt: attempts,
          resource: <T>(name: string) => host.compensationResource(name) as T | undefined,
        }),
      );
      try {
        await Promise.race([undo, new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error(`timed out after ${timeoutMs} ms`)), { once: true }))]);
        succeeded = true;
      } catch (error) {
        lastError = errorText(error);
        if (host.stopSignal.aborted) {
          // Halted (or the lease lost) mid-undo: stop waiting, but keep the outcome of an undo
          // that finishes anyway, so the cancel that goes on after the halt does not repeat it.
          const attempt = attempts;
          void undo.then(
            () => recordOutcome(host, effect, attempt, true, "").catch(() => undefined),
            () => undefined,
          );
          return;
        }
        if (attempts < maxAttempts) {
          await host.write({
            journal: [{ type: "compensation.failed", at: ctx.clock.now(), callSeq: effect.callSeq, data: { tool: effect.tool, attempt: attempts, error: lastError, final: false } }],
          });
        }
      }
    }
    await recordOutcome(host, effect, attempts, succeeded, lastError);
  }
  const resources = await host.releaseResources();
  const all = await ctx.store.listEffects(runId);
  const run = host.current();
  // Every call still in flight (several when calls ran at once); `inflight` carries the uncertain mark.
  const inflight = run.inflightCalls?.length ? run.inflightCalls.map((c) => (run.inflight?.callSeq === c.callSeq ? run.inflight : c)) : run.inflight ? [run.inflight] : [];
  const uncertain = inflight.map((c) => ({ callSeq: c.callSeq, tool: c.name, reason: c.uncertain ? "uncertain_effect" : "in flight when cancelled" }));
  const kept = all.filter((e) => e.state === "kept").sort((a, b) => b.callSeq - a.callSeq);
  const keptFor = kept.length ? await keptForks(ctx, runId) : new Map<number, string[]>();
  const report: CancelReport = {
    compensated: all.filter((e) => e.state === "compensated").sort((a, b) => b.callSeq - a.callSeq).map((e) => ({ callSeq: e.callSeq, tool: e.tool })),
    failed: all.filter((e) => e.state === "failed").map((e) => ({ callSeq: e.callSeq, tool: e.tool, error: e.error ?? "" })),
    uncertain,
    released: resources.released,
    releaseFailed: resources.failed,
    ...(kept.length ? { kept: kept.map((e) => ({ callSeq: e.callSeq, tool: e.tool, forks: keptFor.get(e.callSeq) ?? [] })) } : {}),
  };
  await host.write({
    expect: { status: ["cancelling"] },
    set: { status: "cancelled", report, lease: null, waitingFor: null, ...host.leavingRunning() },
    journal: [
      statusEntry(ctx.clock.now(), "cancelling", "cancelled", null, {
        compensated: report.compensated.length,
        failed: report.failed.length,
        uncertain: report.uncertain.length,
        ...(kept.length ? { kept: kept.length } : {}),
      }),
    ],
    settleCommands: { at: ctx.clock.now(), outcomes: { cancel: "applied", pause: "superseded: cancel" } },
  });
}
