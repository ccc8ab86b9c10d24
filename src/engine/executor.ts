import type { Action, Outcome, StepAgentDefinition } from "./agent.js";
import { trippedBudget } from "./budgets.js";
import type { EngineContext } from "./engine-context.js";
import { TetherError } from "./errors.js";
import { executeTool, streamModelCall, ToolAbortedError } from "./gate.js";
import { idempotencyKey } from "./ids.js";
import type { Json, JsonObject } from "./json.js";
import { modelKey, type TetherModel } from "./model.js";
import type { ResourceHolder } from "./resources.js";
import type { InflightCall, JournalInput, RunPatch, RunRecord, SteeringMessage } from "./store.js";
import type { AnyTool } from "./tool.js";
import { addUsage, usageEntry, type Usage } from "./usage.js";
import { RunSession } from "./run-session.js";
import { planRecovery } from "./recovery.js";
import { statusEntry } from "./status-entry.js";
import { callEntry, partialText } from "./call-journal.js";
import { approvalOf, approvalRequests, approvalRequired, mayNeedApproval, needsApproval, withoutApproval } from "./approval.js";
import type { ApprovalRequest } from "./store.js";
export { maxPartialTextChars } from "./call-journal.js";

export { statusEntry } from "./status-entry.js";

function toolSignature(action: Action & { type: "tool" }): string {
  return `${action.toolName}:${JSON.stringify(action.input)}`;
}

/** The messages a person sent that the agent has not received yet. */
export function undeliveredSteering(run: RunRecord): SteeringMessage[] {
  return run.steering ? run.steering.messages.slice(run.steering.delivered) : [];
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

type CallInFlight = { kind: "model" } | { kind: "tool"; tool: AnyTool | undefined };

/**
 * Executes one claimed run until it stops: completed, failed, paused, cancelled or halted.
 * Every call passes the gate: control is checked and `started` journaled before the call; its
 * outcome and the new snapshot are written in one transaction after it.
 */
export class RunExecutor extends RunSession {
  declare protected readonly agent: StepAgentDefinition;
  private readonly tools: Map<string, AnyTool>;
  private callAbort: AbortController | null = null;
  private inFlight: CallInFlight | null = null;
  /** A call whose `started` was journaled with the previous outcome; the loop performs it next. */
  private chained: { action: Action & { type: "model" | "tool" }; inflight: InflightCall } | null = null;
  /** The run's resources are held: from then on the loop may start calls (and chain them). */
  private resourcesReady = false;

  constructor(ctx: EngineContext, agent: StepAgentDefinition, claimed: RunRecord, resources?: ResourceHolder) {
    super(ctx, agent, claimed, resources);
    this.tools = new Map((agent.tools ?? []).map((t) => [t.name, t]));
  }

  protected abortCalls(reason: unknown): void {
    this.callAbort?.abort(reason);
  }

  protected react(): void {
    const { status } = this.run;
    const call = this.inFlight;
    if (status === "halted") {
      this.stopAll.abort("halted");
      this.callAbort?.abort("halted");
      return;
    }
    if ((status !== "pausing" && status !== "cancelling") || !call) return;
    const immediate = status === "cancelling" || this.run.pauseMode !== "boundary";
    if (call.kind === "model" && immediate) this.callAbort?.abort(status === "cancelling" ? "cancel" : "pause");
    else if (call.kind === "tool" && immediate && call.tool?.abortable) this.callAbort?.abort(status === "cancelling" ? "cancel" : "pause");
    else if (!this.run.waitingFor && this.run.inflight) void this.markWaiting(call.kind, this.run.inflight).catch(() => undefined);
  }

  /** Runs steps while the run is running; without a readable state only a cancel or a pause can finish. */
  protected async drive(hasState: boolean): Promise<void> {
    if (hasState) await this.recover();
    for (;;) {
      const chained = this.chained;
      if (chained) {
        this.chained = null;
        if (this.stopAll.signal.aborted || this.run.status === "halted") {
          // Halted, detached or lease lost between the commit and here: the call never started.
          if (!this.detached) await this.notStarted(chained.inflight).catch(() => undefined);
          continue;
        }
        // Its `started` is journaled: performed exactly as the gate performs a call it let through.
        await this.perform(chained.action, chained.inflight);
        continue;
      }
      const status = this.run.status;
      // Checked before the stop signal, which a halt also fires: the halted run still gives up its lease.
      if (status === "halted") return this.leaveHalted();
      if (this.stopAll.signal.aborted) return;
      if (status === "cancelling") {
        await this.cancel();
        continue;
      }
      if (status === "pausing") {
        if (await this.finishPause()) return;
        continue;
      }
      if (status !== "running" || !hasState) return;
      if (!this.resourcesReady) {
        await this.acquireResources();
        this.resourcesReady = true;
        continue;
      }
      let action: Action;
      try {
        action = this.agent.next(this.state);
      } catch (error) {
        return this.fail("agent_error", `agent ${this.agent.name} failed in next(): ${errorMessage(error)}`);
      }
      if (action.type === "done") {
        if (await this.complete(action.output)) return;
        continue;
      }
      // A person's messages reach the agent before its next model call, without a pause.
      if (action.type === "model" && undeliveredSteering(this.run).length) {
        await this.deliverSteering();
        continue;
      }
      const { repeats, tripped } = this.admission(action, this.run.usage, this.run.step);
      if (tripped) {
        await this.requestPause(tripped, [{ type: "budget.tripped", at: this.now(), data: { reason: tripped } }]);
        continue;
      }
      let call: Action & { type: "model" | "tool" } = action;
      if (action.type === "tool") {
        const approved = await this.approvalGate(action);
        if (!approved) continue;
        call = approved;
      }
      await this.gate(call, repeats);
    }
  }

  /**
   * Before a tool call that needs a person's approval: ask for it (with every other call of its
   * turn that needs one) and pause; deliver a rejection as the call's result; or let the call
   * through with the arguments as approved. Undefined when the call does not start now.
   */
  private async approvalGate(action: Action & { type: "tool" }): Promise<(Action & { type: "tool" }) | undefined> {
    const request = approvalOf(this.run, action);
    const decision = request?.decision;
    if (decision?.decision === "approved") return { ...action, input: decision.input ?? action.input };
    if (request && decision?.decision === "rejected") {
      await this.deliverRejection(action, request);
      return undefined;
    }
    if (request) {
      // Still waiting for a person (a resume that got past it): pause again, nothing new to ask.
      const at = this.now();
      await this.write({ expect: { status: ["running"] }, set: { status: "pausing", statusReason: approvalRequired, pauseMode: "immediate" }, journal: [statusEntry(at, "running", "pausing", approvalRequired)] });
      return undefined;
    }
    if (!(await needsApproval(this.tools.get(action.toolName), action.input))) return action;
    await this.askApproval(action);
    return undefined;
  }

  /** Journals `approval.requested` for the call and the rest of its turn that need approval, and pauses. */
  private async askApproval(action: Action & { type: "tool" }): Promise<void> {
    let turn: (Action & { type: "tool" })[];
    try {
      turn = this.agent.upcomingToolCalls?.(this.state) ?? [];
    } catch {
      turn = [];
    }
    if (turn[0]?.toolCallId !== action.toolCallId || turn[0]?.toolName !== action.toolName) turn = [action];
    const calls: { action: Action & { type: "tool" }; tool: AnyTool; callSeq: number }[] = [];
    for (const [index, call] of turn.entries()) {
      const tool = this.tools.get(call.toolName);
      if (!tool || approvalOf(this.run, call)) continue;
      // The calls of one turn run in order, one call sequence each: this is the one each will take.
      if (index === 0 || (await needsApproval(tool, call.input))) calls.push({ action: call, tool, callSeq: this.run.nextCallSeq + index });
    }
    const at = this.now();
    const { approvals, journal } = approvalRequests(this.run, calls, at);
    const asked = await this.write({
      expect: { status: ["running"] },
      set: { status: "pausing", statusReason: approvalRequired, pauseMode: "immediate", approvals },
      journal: [...journal, statusEntry(at, "running", "pausing", approvalRequired)],
    });
    if (!asked) return;
    for (const request of approvals) if (request.expiresAt !== null && !request.decision) this.ctx.approvalDeadline(this.run.id, request.expiresAt);
  }

  /** A rejected call never starts: the refusal is its outcome, journaled and folded in like any other. */
  private async deliverRejection(action: Action & { type: "tool" }, request: ApprovalRequest): Promise<void> {
    const { actor, note } = request.decision!;
    const callSeq = this.run.nextCallSeq;
    const inflight: InflightCall = { callSeq, kind: "tool", name: action.toolName, action: action as unknown as Json, startedAt: this.now() };
    const message = actor === "deadline" ? `this call was not run: ${note ?? "its approval expired"}` : `a person (${actor}) rejected this call; it was not run. Their note: ${note ?? "(none)"}`;
    await this.commitOutcome(action, inflight, { type: "tool", ok: false, error: "rejected", message }, undefined, [], true, { nextCallSeq: callSeq + 1 });
  }

  /**
   * Appends the messages people sent (`say`) to the agent's state as user messages, with a
   * snapshot at the same step and a `message.delivered` entry each. The queue only grows, and
   * `delivered` moves forward under the version it was read at, so a message sent meanwhile is
   * delivered next time, never lost.
   */
  private async deliverSteering(): Promise<void> {
    const pending = undeliveredSteering(this.run);
    const queue = this.run.steering!;
    const at = this.now();
    const next = { messages: [...this.state.messages, ...pending.map((m) => ({ role: "user" as const, content: m.text, author: m.actor }))], vars: this.state.vars };
    const snapshot = this.writer.prepare(next, this.run.step, at);
    const journal: JournalInput[] = pending.map((m, i) => ({ type: "message.delivered", at, data: { id: m.id, actor: m.actor, text: m.text, index: this.state.messages.length + i } }));
    const written = await this.write({ expect: { status: ["running"], version: this.run.version }, set: { steering: { ...queue, delivered: queue.delivered + pending.length } }, journal, snapshot });
    // Not written: the run changed meanwhile (another message, a pause); `write` took the fresh
    // record, and the loop looks again.
    if (written) {
      this.writer.commit();
      this.state = next;
    }
  }

  /** The gate: check control and journal `started` in one transaction, then run the call. */
  private async gate(action: Action & { type: "model" | "tool" }, repeats: number): Promise<void> {
    const started = this.startedWrite(action, repeats);
    if (!(await this.write({ expect: { status: ["running"] }, set: started.set, journal: [started.entry] }))) return;
    await this.perform(action, started.inflight);
  }

  /** What the gate writes for a call: `started` in the journal, the call in flight, the next sequence number. */
  private startedWrite(action: Action & { type: "model" | "tool" }, repeats: number): { inflight: InflightCall; set: RunPatch; entry: JournalInput } {
    const callSeq = this.run.nextCallSeq;
    const at = this.now();
    const name = action.type === "model" ? modelKey(this.model()) : action.toolName;
    // A model request carries the whole conversation, and recovery never re-uses it (an
    // interrupted model call is re-planned from the snapshot), so only its type is kept: the
    // run record, rewritten on every update, stays the same size however long the history.
    const planned: Json = action.type === "model" ? { type: "model" } : (action as unknown as Json);
    const inflight: InflightCall = { callSeq, kind: action.type, name, action: planned, startedAt: at };
    const data: JsonObject =
      action.type === "model"
        ? { kind: "model", name, key: idempotencyKey(this.run.id, callSeq), messages: action.request.messages.length, tools: action.request.tools.length }
        : { kind: "tool", name, key: idempotencyKey(this.run.id, callSeq), toolCallId: action.toolCallId, input: action.input };
    return {
      inflight,
      set: { nextCallSeq: callSeq + 1, inflight, guard: action.type === "tool" ? { ...this.run.guard, lastToolSignature: toolSignature(action), repeats } : this.run.guard },
      entry: callEntry("call.started", at, callSeq, data),
    };
  }

  /**
   * The call the loop would let through the gate right after this outcome, if any: the run is
   * still running, the agent plans a call and no budget trips. Anything else (done, a throw in
   * `next`, a budget) is left to the loop, which asks again.
   */
  private nextChained(step: number, usage: Usage | undefined): { action: Action & { type: "model" | "tool" }; repeats: number } | undefined {
    // Not before the loop has acquired the resources (a call retried by recovery comes first).
    if (!this.resourcesReady || this.run.status !== "running" || this.stopAll.signal.aborted) return undefined;
    let action: Action;
    try {
      action = this.agent.next(this.state);
    } catch {
      return undefined; // the loop calls next() again and fails the run with the error
    }
    if (action.type === "done") return undefined;
    // Messages waiting for the agent go in before the model call: the loop delivers them first.
    if (action.type === "model" && undeliveredSteering(this.run).length) return undefined;
    // A call that may need a person's approval passes the loop's own check first.
    if (action.type === "tool" && (mayNeedApproval(this.tools.get(action.toolName)) || approvalOf(this.run, action))) return undefined;
    const { repeats, tripped } = this.admission(action, usage ? addUsage(this.run.usage, usage) : this.run.usage, step);
    return tripped ? undefined : { action, repeats };
  }

  /** How many times in a row this call repeats a tool call, and the budget it trips at `step` with `usage` spent, if any. */
  private admission(action: Action & { type: "model" | "tool" }, usage: Usage, step: number): { repeats: number; tripped: string | undefined } {
    const repeats = action.type === "tool" && this.run.guard.lastToolSignature === toolSignature(action) ? this.run.guard.repeats + 1 : 1;
    const tripped = trippedBudget(this.run.budgets, { usage, step, activeMs: this.leavingRunning().activeMs ?? 0, repeatedToolCalls: action.type === "tool" ? repeats : 0 });
    return { repeats, tripped };
  }

  private model(): TetherModel {
    return this.ctx.resolveModel(this.run.model ?? this.agent.model);
  }

  private async perform(action: Action & { type: "model" | "tool" }, inflight: InflightCall): Promise<void> {
    this.callAbort = new AbortController();
    const signal = this.callAbort.signal;
    this.inFlight = action.type === "model" ? { kind: "model" } : { kind: "tool", tool: this.tools.get(action.toolName) };
    // A pause or cancel recorded while `started` was being written applies to this call now.
    this.react();
    try {
      if (action.type === "model") await this.performModel(action, inflight, signal);
      else await this.performTool(action, inflight, signal);
    } finally {
      this.callAbort = null;
      this.inFlight = null;
    }
  }

  private async performModel(action: Action & { type: "model" }, inflight: InflightCall, signal: AbortSignal): Promise<void> {
    const model = this.model();
    const key = modelKey(model);
    const runId = this.run.id;
    const { callSeq } = inflight;
    const outcome = await this.whileInFlight(
      streamModelCall(model, action.request, {
        signal,
        idempotencyKey: idempotencyKey(runId, callSeq),
        onDelta: (text) => this.ctx.bus.publishLive(runId, "model.delta", this.now(), { callSeq, text }),
      }),
    );
    const usageOf = (u: { inputTokens: number; outputTokens: number; cachedInputTokens?: number }): Usage => {
      const usage = { inputTokens: u.inputTokens, outputTokens: u.outputTokens, cachedInputTokens: u.cachedInputTokens ?? 0 };
      return { ...usage, costUsd: this.ctx.prices.cost(key, usage) };
    };
    const durationMs = this.now() - inflight.startedAt;
    if (outcome.type === "completed") {
      await this.commitOutcome(action, inflight, { type: "model", result: outcome.result }, usageOf(outcome.result.usage), [], true);
    } else if (outcome.type === "aborted") {
      const usage = usageOf(outcome.usage);
      await this.write({
        set: { inflight: null, waitingFor: null, usage: addUsage(this.run.usage, usage) },
        journal: [
          callEntry("call.aborted", this.now(), callSeq, {
            kind: "model",
            name: key,
            reason: String(signal.reason ?? "aborted"),
            usage: usageEntry(usage),
            estimated: outcome.estimated,
            streamedChars: outcome.text.length,
            ...partialText(outcome.text),
            durationMs,
          }),
        ],
      });
    } else {
      const usage = usageOf(outcome.usage);
      const reason = `model_error: ${outcome.error.message}`;
      await this.write({
        set: { inflight: null, waitingFor: null, usage: addUsage(this.run.usage, usage), ...(this.run.status === "running" ? { status: "pausing", statusReason: reason, pauseMode: "immediate" } : {}) },
        journal: [
          callEntry("call.failed", this.now(), callSeq, { kind: "model", name: key, error: outcome.error.code, message: outcome.error.message, usage: usageEntry(usage), durationMs }),
          ...(this.run.status === "running" ? [statusEntry(this.now(), "running", "pausing", reason)] : []),
        ],
      });
    }
  }

  private async performTool(action: Action & { type: "tool" }, inflight: InflightCall, signal: AbortSignal): Promise<void> {
    const tool = this.tools.get(action.toolName);
    if (!tool) {
      const known = [...this.tools.keys()].join(", ");
      await this.commitOutcome(action, inflight, { type: "tool", ok: false, error: "unknown_tool", message: `no tool named "${action.toolName}" (tools: ${known})` });
      return;
    }
    const runId = this.run.id;
    const execution = this.whileInFlight(executeTool(tool, action.input, {
      runId,
      idempotencyKey: idempotencyKey(runId, inflight.callSeq),
      signal,
      fencingToken: this.run.epoch,
      progress: (update) => {
        void this.write({ journal: [callEntry("call.progress", this.now(), inflight.callSeq, { ...update })] }).catch(() => undefined);
      },
      resource: <T>(name: string) => this.resources.get(name) as T,
    }));
    let outcome: Outcome & { type: "tool" };
    try {
      // An abortable tool honours the signal a halt or a lost lease fires, so its end is awaited and
      // journaled; only a tool that ignores its signal is left behind.
      outcome = await (tool.abortable ? execution : this.untilStopped(execution));
      // A tool's error text becomes a message the model reads and the run keeps: no secrets in it.
      if (!outcome.ok) outcome = { ...outcome, message: this.ctx.redact(outcome.message) };
    } catch (error) {
      if (error instanceof ToolAbortedError) {
        await this.write({
          set: { inflight: null, waitingFor: null },
          journal: [callEntry("call.aborted", this.now(), inflight.callSeq, { kind: "tool", name: tool.name, reason: String(error.reason ?? "aborted"), durationMs: this.now() - inflight.startedAt })],
        });
        return;
      }
      if (TetherError.isInstance(error) && error.code === "tool_unavailable") {
        const reason = `tool_unavailable: ${error.message}`;
        const moving = this.run.status === "running";
        await this.write({
          set: { inflight: null, waitingFor: null, ...(moving ? { status: "pausing", statusReason: reason, pauseMode: "immediate" } : {}) },
          journal: [
            callEntry("call.failed", this.now(), inflight.callSeq, { kind: "tool", name: tool.name, error: error.code, message: error.message, durationMs: this.now() - inflight.startedAt }),
            ...(moving ? [statusEntry(this.now(), "running", "pausing", reason)] : []),
          ],
        });
        return;
      }
      if (error === stopped) {
        // Halted (or the lease was lost) while a tool that ignores its signal is still running:
        // stop waiting, but keep its result if it arrives while this process still holds the run.
        void execution.then((late) => this.commitOutcome(action, inflight, late).catch(() => undefined), () => undefined);
        return;
      }
      throw error;
    }
    await this.commitOutcome(action, inflight, outcome, undefined, [], true);
  }

  /** The call counts as in flight until it settles, not until its outcome is written: nothing waits for a finished call. */
  private whileInFlight<T>(call: Promise<T>): Promise<T> {
    return call.finally(() => {
      this.inFlight = null;
    });
  }

  private untilStopped<T>(promise: Promise<T>): Promise<T> {
    const signal = this.stopAll.signal;
    if (signal.aborted) return Promise.reject(stopped);
    return new Promise<T>((resolve, reject) => {
      const onStop = () => reject(stopped);
      signal.addEventListener("abort", onStop, { once: true });
      promise.then(
        (value) => {
          signal.removeEventListener("abort", onStop);
          resolve(value);
        },
        (error) => {
          signal.removeEventListener("abort", onStop);
          reject(error);
        },
      );
    });
  }

  /** The outcome, the new snapshot and the usage, in one transaction. */
  private async commitOutcome(action: Action, inflight: InflightCall, outcome: Outcome, usage?: Usage, extra: JournalInput[] = [], chain = false, patch: RunPatch = {}): Promise<void> {
    let recordedIn: number | undefined;
    try {
      const applied = this.agent.apply(this.state, action, outcome);
      recordedIn = applied ? applied.recordedInMessage : undefined;
    } catch (error) {
      return this.fail("agent_error", `agent ${this.agent.name} failed in apply(): ${errorMessage(error)}`);
    }
    const at = this.now();
    const step = this.run.step + 1;
    const snapshot = this.writer.prepare(this.state, step, at);
    const failed = outcome.type === "tool" && !outcome.ok;
    const result: JsonObject = recordedIn !== undefined ? { resultInMessage: recordedIn } : { result: outcomeJson(outcome) };
    const data: JsonObject = {
      kind: inflight.kind,
      name: inflight.name,
      durationMs: at - inflight.startedAt,
      ...(usage ? { usage: usageEntry(usage) } : {}),
      ...(failed ? { error: outcome.error, message: outcome.message } : {}),
      ...(outcome.type === "model" ? { finishReason: outcome.result.finishReason } : {}),
      ...result,
    };
    const tool = action.type === "tool" ? this.tools.get(action.toolName) : undefined;
    const effects =
      tool?.compensate && outcome.type === "tool" && outcome.ok && action.type === "tool"
        ? [{ callSeq: inflight.callSeq, tool: tool.name, input: action.input, result: outcome.output, state: "done" as const, attempts: 0, error: null, updatedAt: at }]
        : undefined;
    const guard = this.failureGuard(inflight, outcome);
    const tripped = guard.tripped && this.run.status === "running";
    const approvals = withoutApproval(this.run, action);
    const outcomeWrite = {
      set: {
        ...patch,
        ...(approvals ? { approvals } : {}),
        step,
        inflight: null,
        waitingFor: null,
        guard: guard.guard,
        ...(usage ? { usage: addUsage(this.run.usage, usage) } : {}),
        ...(tripped ? { status: "pausing" as const, statusReason: guard.tripped, pauseMode: "immediate" as const } : {}),
      },
      journal: [
        ...extra,
        callEntry(failed ? "call.failed" : "call.completed", at, inflight.callSeq, data),
        ...(tripped ? [{ type: "budget.tripped", at, data: { reason: guard.tripped!, failures: guard.guard.recentFailures ?? [] } } as JournalInput, statusEntry(at, "running", "pausing", guard.tripped)] : []),
      ],
      snapshot,
      ...(effects ? { effects } : {}),
    };
    // The next call's `started` rides in the same transaction when the loop would start it at
    // once: one commit a step instead of two. It still expects `running`, as the gate does.
    const next = chain && !tripped ? this.nextChained(step, usage) : undefined;
    let started: ReturnType<RunExecutor["startedWrite"]> | undefined;
    try {
      started = next ? this.startedWrite(next.action, next.repeats) : undefined;
    } catch {
      // Planning the next call failed (a model that does not resolve, say): this step's outcome
      // is written alone, and the loop meets the same error on its own path.
      started = undefined;
    }
    if (next && started) {
      const ok = await this.write({
        ...outcomeWrite,
        expect: { status: ["running"] },
        // The loop guard of the next call, on top of the failure count this outcome leaves.
        set: { ...outcomeWrite.set, ...started.set, guard: { ...outcomeWrite.set.guard, lastToolSignature: started.set.guard!.lastToolSignature, repeats: started.set.guard!.repeats } },
        journal: [...outcomeWrite.journal, started.entry],
      });
      if (ok) {
        this.writer.commit();
        this.chained = { action: next.action, inflight: started.inflight };
        return;
      }
    }
    await this.write(outcomeWrite);
    this.writer.commit();
  }

  /**
   * The repeated-failure guard: failed tool calls in a row (whatever the tool or its arguments)
   * are counted, a success resets the count, and `maxConsecutiveFailures` of them pause the run
   * with `repeated_failures` and the failures as evidence.
   */
  private failureGuard(inflight: InflightCall, outcome: Outcome): { guard: RunRecord["guard"]; tripped: string | undefined } {
    const current = this.run.guard;
    // A person's rejection is not a failure of the tool.
    if (outcome.type !== "tool" || (!outcome.ok && outcome.error === "rejected")) return { guard: current, tripped: undefined };
    if (outcome.ok) return { guard: current.failures ? { ...current, failures: 0, recentFailures: [] } : current, tripped: undefined };
    const max = this.run.budgets.maxConsecutiveFailures;
    const failures = (current.failures ?? 0) + 1;
    const recentFailures = [...(current.recentFailures ?? []), { callSeq: inflight.callSeq, tool: inflight.name, error: outcome.error, message: outcome.message.slice(0, 500) }].slice(-(max ?? 5));
    const tripped = max !== undefined && failures >= max ? `repeated_failures: ${failures} failed tool calls in a row (last: ${inflight.name}: ${outcome.message.slice(0, 200)})` : undefined;
    return { guard: { ...current, failures, recentFailures }, tripped };
  }

  /** A chained call whose `started` was journaled but that this executor never began. */
  private async notStarted(inflight: InflightCall): Promise<void> {
    await this.write({
      set: { inflight: null, waitingFor: null },
      journal: [callEntry("call.aborted", this.now(), inflight.callSeq, { kind: inflight.kind, name: inflight.name, reason: "not_started" })],
    });
  }

  private async recover(): Promise<void> {
    const inflight = this.run.inflight;
    if (!inflight) return;
    const action = inflight.action as unknown as Action;
    const tool = action.type === "tool" ? this.tools.get(action.toolName) : undefined;
    const plan = await planRecovery({ inflight, action, tool, cancelling: this.run.status === "cancelling", runId: this.run.id });
    const at = this.now();
    const note: JournalInput = { type: "recovery", at, callSeq: inflight.callSeq, data: { decision: plan.type, name: inflight.name } };
    switch (plan.type) {
      case "abandon":
        await this.write({
          set: { inflight: null, waitingFor: null },
          journal: [note, callEntry("call.aborted", at, inflight.callSeq, { kind: inflight.kind, name: inflight.name, reason: plan.reason })],
        });
        return;
      case "apply":
        await this.commitOutcome(action, inflight, plan.outcome, undefined, [note, ...(plan.resolved ? [plan.resolved(at)] : [])]);
        return;
      case "retry": {
        // Only a running run issues it again, checked with the note (invariant 1); otherwise the
        // call and any decision on it stay for the claim after a resume.
        if (this.run.status !== "running" || action.type === "done") return;
        const retried = { ...inflight, uncertain: false, resolution: undefined };
        if (await this.write({ expect: { status: ["running"] }, set: { inflight: retried }, journal: [note] })) await this.perform(action, retried);
        return;
      }
      case "uncertain": {
        if (inflight.uncertain) return;
        const moving = this.run.status === "running";
        await this.write({
          set: {
            inflight: { ...inflight, uncertain: true },
            ...(moving ? { status: "pausing", statusReason: "uncertain_effect", pauseMode: "immediate" } : {}),
          },
          journal: [
            note,
            callEntry("call.uncertain", at, inflight.callSeq, { kind: "tool", name: inflight.name, reason: plan.reason }),
            ...(moving ? [statusEntry(at, "running", "pausing", "uncertain_effect")] : []),
          ],
        });
        return;
      }
    }
  }

}

const stopped = Symbol("stopped");

function outcomeJson(outcome: Outcome): Json {
  if (outcome.type === "model") return { text: outcome.result.text, toolCalls: outcome.result.toolCalls as unknown as Json, finishReason: outcome.result.finishReason };
  if (outcome.ok) return outcome.output;
  return { error: outcome.error, message: outcome.message };
}
