import type { Action, Outcome, StepAgentDefinition } from "./agent.js";
import { trippedBudget } from "./budgets.js";
import type { EngineContext } from "./engine-context.js";
import { TetherError } from "./errors.js";
import { executeTool, streamModelCall, ToolAbortedError } from "./gate.js";
import { idempotencyKey } from "./ids.js";
import type { Json, JsonObject } from "./json.js";
import { modelKey, type TetherModel } from "./model.js";
import type { ResourceHolder } from "./resources.js";
import type { InflightCall, JournalInput, ReissuableCall, RunPatch, RunRecord } from "./store.js";
import type { AnyTool } from "./tool.js";
import { addUsage, usageEntry, type Usage } from "./usage.js";
import { RunSession, stopped } from "./run-session.js";
import { undeliveredSteering } from "./steering.js";
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

/** The aborted call `action` makes again, taken from `reissuable`: a tool by name and input, a model call by kind. */
function takeReissue(reissuable: ReissuableCall[], action: Action & { type: "model" | "tool" }): ReissuableCall | undefined {
  const signature = action.type === "tool" ? toolSignature(action) : "";
  const index = reissuable.findIndex((c) => c.kind === action.type && c.signature === signature);
  return index < 0 ? undefined : reissuable.splice(index, 1)[0];
}

export { undeliveredSteering } from "./steering.js";

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A call between its `started` and its settling. */
interface LiveCall {
  kind: "model" | "tool";
  tool: AnyTool | undefined;
  controller: AbortController;
  inflight: InflightCall;
}

/** A call the gate lets through, with how many times in a row it repeats the previous tool call. */
/** `callSeq`: the position the call keeps (an approved call, asked for at that position, keeps its idempotency key). */
type Admitted = { action: Action & { type: "model" | "tool" }; repeats: number; callSeq?: number };

/** A call whose `started` is journaled, to perform. */
type Started = { action: Action & { type: "model" | "tool" }; inflight: InflightCall };

/** How many tool calls of one turn a step agent may have in flight at once (1: one after another). */
export function parallelLimit(setting: boolean | number | undefined): number {
  if (setting === undefined || setting === false) return 1;
  if (setting === true) return defaultParallelToolCalls;
  return Math.max(1, Math.floor(setting));
}

/** The limit when an agent says `parallelToolCalls: true`. */
export const defaultParallelToolCalls = 8;

/**
 * Executes one claimed run until it stops: completed, failed, paused, cancelled or halted.
 * Every call passes the gate: control is checked and `started` journaled before the call; its
 * outcome and the new snapshot are written in one transaction after it.
 */
export class RunExecutor extends RunSession {
  declare protected readonly agent: StepAgentDefinition;
  private readonly tools: Map<string, AnyTool>;
  /** The calls in flight, by call sequence: one, or several tool calls of one model turn. */
  private readonly live = new Map<number, LiveCall>();
  /** Calls whose `started` was journaled with the previous outcome; the loop performs them next. */
  private chained: Started[] | null = null;
  private readonly parallel: number;
  /** The run's resources are held: from then on the loop may start calls (and chain them). */
  private resourcesReady = false;

  constructor(ctx: EngineContext, agent: StepAgentDefinition, claimed: RunRecord, resources?: ResourceHolder) {
    super(ctx, agent, claimed, resources);
    this.tools = new Map((agent.tools ?? []).map((t) => [t.name, t]));
    this.parallel = parallelLimit(agent.parallelToolCalls);
  }


  protected abortCalls(reason: unknown): void {
    for (const call of this.live.values()) call.controller.abort(reason);
  }

  /**
   * A pause or cancel reaches every call in flight: model calls and abortable tools are aborted
   * (unless the pause waits for the step boundary); the first of the others is shown as what the
   * run waits for.
   */
  protected react(): void {
    if (this.run.status === "halted") {
      this.stopAll.abort("halted");
      this.abortCalls("halted");
      return;
    }
    const calls = [...this.live.values()].map((call) => ({ ...call, abortable: call.kind === "model" || call.tool?.abortable === true }));
    this.reachCallsInFlight(calls, (callSeq) => this.live.has(callSeq));
  }


  /** Runs steps while the run is running; without a readable state only a cancel or a pause can finish. */
  protected async drive(hasState: boolean): Promise<void> {
    if (hasState) await this.recover();
    for (;;) {
      const chained = this.chained;
      if (chained) {
        this.chained = null;
        if (this.stopAll.signal.aborted || this.run.status === "halted") {
          // Halted, detached or lease lost between the commit and here: the calls never started.
          if (!this.detached) for (const call of chained) await this.notStarted(call.inflight).catch(() => undefined);
          continue;
        }
        // Their `started` is journaled: performed exactly as the gate performs calls it let through.
        await this.performAll(chained);
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
      let call: Admitted = { action, repeats };
      if (action.type === "tool") {
        const approved = await this.approvalGate(action);
        if (!approved) continue;
        // Approved at the position it was asked for: a re-issue (after a pause aborted it) keeps its key.
        call = { action: approved, repeats, callSeq: approvalOf(this.run, action)?.callSeq };
      }
      await this.gate(this.withRestOfTurn(call, this.run.step, this.run.usage));
    }
  }

  /**
   * The calls to let through together: the tool call `first` and, when the agent allows parallel
   * tool calls, the calls after it in the same model turn (`upcomingToolCalls`), up to the limit,
   * stopping before a call that may need a person's approval (it keeps the approval flow) or
   * whose budget or loop guard would trip, checked per call as if the calls before it had each
   * taken their step. Call sequence numbers (and so idempotency keys) follow the turn's order.
   */
  private withRestOfTurn(first: Admitted, step: number, usage: Usage): Admitted[] {
    if (first.action.type !== "tool" || this.parallel < 2 || !this.agent.upcomingToolCalls) return [first];
    let turn: (Action & { type: "tool" })[];
    try {
      turn = this.agent.upcomingToolCalls(this.state);
    } catch {
      return [first];
    }
    if (turn[0]?.toolCallId !== first.action.toolCallId || turn[0]?.toolName !== first.action.toolName) return [first];
    const batch: Admitted[] = [first];
    let previous = toolSignature(first.action);
    let repeats = first.repeats;
    const activeMs = this.leavingRunning().activeMs ?? 0;
    for (const call of turn.slice(1)) {
      if (batch.length >= this.parallel) break;
      const tool = this.tools.get(call.toolName);
      if (!tool || mayNeedApproval(tool) || approvalOf(this.run, call)) break;
      const signature = toolSignature(call);
      repeats = signature === previous ? repeats + 1 : 1;
      if (trippedBudget(this.run.budgets, { usage, step: step + batch.length, activeMs, repeatedToolCalls: repeats })) break;
      batch.push({ action: call, repeats });
      previous = signature;
    }
    return batch;
  }

  /** Performs calls whose `started` is journaled: one, or several at once, each outcome committed as it comes. */
  private async performAll(calls: Started[]): Promise<void> {
    if (calls.length === 1) return this.perform(calls[0].action, calls[0].inflight);
    const settled = await Promise.allSettled(
      calls.map((call) =>
        this.perform(call.action, call.inflight).catch((error: unknown) => {
          // The run cannot go on here (a lost lease, a store error): the other calls stop too.
          this.abortCalls(error);
          throw error;
        }),
      ),
    );
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed) throw failed.reason;
  }

  /**
   * What the run record says once call `callSeq` is no longer in flight. A call made alone is
   * `inflight`; calls made together are `inflightCalls`, with `inflight` the oldest of them (or
   * the one a person must decide on).
   */
  /** The calls whose key a new attempt keeps, with `inflight` (just aborted) added. */
  private reissuable(inflight: InflightCall, signature: string): ReissuableCall[] {
    const key = inflight.key ?? idempotencyKey(this.run.id, inflight.callSeq);
    return [...(this.run.reissue ?? []), { key, callSeq: inflight.callSeq, kind: inflight.kind, signature }];
  }

  private callsLeft(callSeq: number): RunPatch {
    const calls = this.run.inflightCalls;
    if (!calls?.length) return { inflight: null, waitingFor: null };
    const remaining = calls.filter((c) => c.callSeq !== callSeq);
    const current = this.run.inflight;
    return {
      inflightCalls: remaining,
      inflight: current && current.callSeq !== callSeq && remaining.some((c) => c.callSeq === current.callSeq) ? current : (remaining[0] ?? null),
      ...(!remaining.length || this.run.waitingFor?.callSeq === callSeq ? { waitingFor: null } : {}),
    };
  }

  /**
   * Before a tool call that needs a person's approval: ask for it (with every other call of its
   * turn that needs one) and pause; deliver a rejection as the call's result; or let the call
   * through with the arguments as approved. Undefined when the call does not start now.
   */
  private async approvalGate(action: Action & { type: "tool" }): Promise<(Action & { type: "tool" }) | undefined> {
    const request = approvalOf(this.run, action);
    const decision = request?.decision;
    // The arguments the person approved (as asked, or as they edited them), never what the agent
    // would propose now: a state edited while the call waited must not change an approved call.
    if (decision?.decision === "approved") return { ...action, input: decision.input ?? request!.input };
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

  /** The gate: check control and journal `started` (of each call let through together) in one transaction, then run the calls. */
  private async gate(calls: Admitted[]): Promise<void> {
    const started = this.startedWrite(calls);
    if (!(await this.write({ expect: { status: ["running"] }, set: started.set, journal: started.entries }))) return;
    await this.performAll(started.calls);
  }

  /** What the gate writes for calls: `started` of each in the journal, the calls in flight, the next sequence number. */
  private startedWrite(admitted: Admitted[]): { calls: Started[]; set: RunPatch; entries: JournalInput[] } {
    let next = this.run.nextCallSeq;
    const at = this.now();
    let guard = this.run.guard;
    const calls: Started[] = [];
    const entries: JournalInput[] = [];
    const reissuable = [...(this.run.reissue ?? [])];
    for (const { action, repeats, callSeq: kept } of admitted) {
      const callSeq = kept !== undefined && kept < next ? kept : next++;
      // The same call as one a pause aborted: a new attempt under that call's key.
      const again = kept === undefined ? takeReissue(reissuable, action) : undefined;
      const key = again?.key ?? idempotencyKey(this.run.id, callSeq);
      const name = action.type === "model" ? modelKey(this.model(action)) : action.toolName;
      // A model request carries the whole conversation, and recovery never re-uses it (an
      // interrupted model call is re-planned from the snapshot), so only its type is kept: the
      // run record, rewritten on every update, stays the same size however long the history.
      const planned: Json = action.type === "model" ? { type: "model" } : (action as unknown as Json);
      const inflight: InflightCall = { callSeq, kind: action.type, name, action: planned, startedAt: at, ...(again ? { key } : {}) };
      const reissueOf: JsonObject = again ? { reissueOf: again.callSeq } : {};
      const data: JsonObject =
        action.type === "model"
          ? { kind: "model", name, key, ...reissueOf, messages: action.request.messages.length, tools: action.request.tools.length }
          : { kind: "tool", name, key, ...reissueOf, toolCallId: action.toolCallId, input: action.input };
      if (action.type === "tool") guard = { ...guard, lastToolSignature: toolSignature(action), repeats };
      calls.push({ action, inflight });
      entries.push(callEntry("call.started", at, callSeq, data));
    }
    const inflights = calls.map((c) => c.inflight);
    return {
      calls,
      // An aborted call the agent did not make again is not one: its key is not kept further.
      set: { nextCallSeq: next, inflight: inflights[0], ...(calls.length > 1 ? { inflightCalls: inflights } : {}), guard, ...(this.run.reissue?.length ? { reissue: null } : {}) },
      entries,
    };
  }

  /**
   * The call the loop would let through the gate right after this outcome, if any: the run is
   * still running, the agent plans a call and no budget trips. Anything else (done, a throw in
   * `next`, a budget) is left to the loop, which asks again.
   */
  private nextChained(step: number, usage: Usage | undefined): Admitted[] | undefined {
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
    const spent = usage ? addUsage(this.run.usage, usage) : this.run.usage;
    const { repeats, tripped } = this.admission(action, spent, step);
    return tripped ? undefined : this.withRestOfTurn({ action, repeats }, step, spent);
  }

  /** How many times in a row this call repeats a tool call, and the budget it trips at `step` with `usage` spent, if any. */
  private admission(action: Action & { type: "model" | "tool" }, usage: Usage, step: number): { repeats: number; tripped: string | undefined } {
    const repeats = action.type === "tool" && this.run.guard.lastToolSignature === toolSignature(action) ? this.run.guard.repeats + 1 : 1;
    const tripped = trippedBudget(this.run.budgets, { usage, step, activeMs: this.leavingRunning().activeMs ?? 0, repeatedToolCalls: action.type === "tool" ? repeats : 0 });
    return { repeats, tripped };
  }

  /** The call's own model if the action names one, else the run's, else the agent's. */
  private model(action?: Action): TetherModel {
    return this.ctx.resolveModel((action?.type === "model" ? action.model : undefined) ?? this.run.model ?? this.agent.model);
  }

  private async perform(action: Action & { type: "model" | "tool" }, inflight: InflightCall): Promise<void> {
    const controller = new AbortController();
    const { callSeq } = inflight;
    this.live.set(callSeq, { kind: action.type, tool: action.type === "tool" ? this.tools.get(action.toolName) : undefined, controller, inflight });
    if (this.stopAll.signal.aborted) controller.abort(this.stopAll.signal.reason);
    // A pause or cancel recorded while `started` was being written applies to this call now.
    this.react();
    try {
      if (action.type === "model") await this.performModel(action, inflight, controller.signal);
      else await this.performTool(action, inflight, controller.signal);
    } finally {
      this.live.delete(callSeq);
    }
  }

  private async performModel(action: Action & { type: "model" }, inflight: InflightCall, signal: AbortSignal): Promise<void> {
    const model = this.model(action);
    const key = modelKey(model);
    const runId = this.run.id;
    const { callSeq } = inflight;
    const outcome = await this.whileInFlight(
      callSeq,
      streamModelCall(model, action.request, {
        signal,
        idempotencyKey: inflight.key ?? idempotencyKey(runId, callSeq),
        onDelta: (text, offset) => this.ctx.bus.publishDelta(runId, callSeq, text, this.ctx.clock, offset),
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
      await this.writeStoppedCall(() => ({
        set: { ...this.callsLeft(callSeq), usage: addUsage(this.run.usage, usage), reissue: this.reissuable(inflight, "") },
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
      }), this.othersInFlight);
    } else {
      const usage = usageOf(outcome.usage);
      const failedCall = () => ({
        set: { ...this.callsLeft(callSeq), usage: addUsage(this.run.usage, usage) },
        journal: [callEntry("call.failed", this.now(), callSeq, { kind: "model", name: key, error: outcome.error.code, message: outcome.error.message, usage: usageEntry(usage), durationMs })],
      });
      await this.serial(async () => {
        if (!(await this.writePausing(failedCall, `model_error: ${outcome.error.message}`))) await this.write(failedCall());
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
    const execution = this.whileInFlight(inflight.callSeq, executeTool(tool, action.input, {
      runId,
      idempotencyKey: inflight.key ?? idempotencyKey(runId, inflight.callSeq),
      signal,
      fencingToken: this.run.epoch,
      progress: (update) => {
        void this.serial(() => this.write({ journal: [callEntry("call.progress", this.now(), inflight.callSeq, { ...update })] })).catch(() => undefined);
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
        await this.writeStoppedCall(() => ({
          set: { ...this.callsLeft(inflight.callSeq), reissue: this.reissuable(inflight, toolSignature(action)) },
          journal: [callEntry("call.aborted", this.now(), inflight.callSeq, { kind: "tool", name: tool.name, reason: String(error.reason ?? "aborted"), durationMs: this.now() - inflight.startedAt })],
        }), this.othersInFlight);
        return;
      }
      if (TetherError.isInstance(error) && error.code === "tool_unavailable") {
        const failedCall = () => ({
          set: this.callsLeft(inflight.callSeq),
          journal: [callEntry("call.failed", this.now(), inflight.callSeq, { kind: "tool", name: tool.name, error: error.code, message: error.message, durationMs: this.now() - inflight.startedAt })],
        });
        await this.serial(async () => {
          if (!(await this.writePausing(failedCall, `tool_unavailable: ${error.message}`))) await this.write(failedCall());
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

  /** Whether a call is in flight or journaled as started and about to be made. */
  private readonly othersInFlight = (): boolean => this.live.size > 0 || this.chained !== null;

  /** The call counts as in flight until it settles, not until its outcome is written: nothing waits for a finished call. */
  private whileInFlight<T>(callSeq: number, call: Promise<T>): Promise<T> {
    return call.finally(() => {
      this.live.delete(callSeq);
    });
  }

  /** The outcome, the new snapshot and the usage, in one transaction (after the writes queued before it). */
  private commitOutcome(action: Action, inflight: InflightCall, outcome: Outcome, usage?: Usage, extra: JournalInput[] = [], chain = false, patch: RunPatch = {}): Promise<void> {
    return this.serial(() => this.commitNow(action, inflight, outcome, usage, extra, chain, patch));
  }

  private async commitNow(action: Action, inflight: InflightCall, outcome: Outcome, usage: Usage | undefined, extra: JournalInput[], chain: boolean, patch: RunPatch): Promise<void> {
    if (this.run.status === "failed") {
      // A call of the same turn failed the run (its `apply` threw): this one's end is journaled, the state stays as the run failed.
      const failed = outcome.type === "tool" && !outcome.ok;
      await this.write({
        set: this.callsLeft(inflight.callSeq),
        journal: [...extra, callEntry(failed ? "call.failed" : "call.completed", this.now(), inflight.callSeq, { kind: inflight.kind, name: inflight.name, durationMs: this.now() - inflight.startedAt, result: outcomeJson(outcome), notApplied: "run_failed" })],
      });
      return;
    }
    let recordedIn: number | undefined;
    try {
      const applied = this.agent.apply(this.state, action, outcome);
      recordedIn = applied ? applied.recordedInMessage : undefined;
    } catch (error) {
      this.abortCalls("failed");
      // The other calls of its turn end on their own (journaled, not applied); this one is no longer in flight.
      if (this.run.inflightCalls?.length) await this.write({ set: this.callsLeft(inflight.callSeq) });
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
        ...this.callsLeft(inflight.callSeq),
        guard: guard.guard,
        ...(usage ? { usage: addUsage(this.run.usage, usage) } : {}),
      },
      journal: [...extra, callEntry(failed ? "call.failed" : "call.completed", at, inflight.callSeq, data)],
      snapshot,
      ...(effects ? { effects } : {}),
    };
    // The guard tripped: the outcome and the pause go together, unless a command another process
    // wrote meanwhile (a cancel, a halt, a pause) holds the run; then the outcome goes alone.
    if (tripped) {
      const trip: JournalInput = { type: "budget.tripped", at, data: { reason: guard.tripped!, failures: guard.guard.recentFailures ?? [] } };
      if (await this.writePausing(() => ({ ...outcomeWrite, journal: [...outcomeWrite.journal, trip] }), guard.tripped!)) {
        this.writer.commit();
        return;
      }
    }
    // The next call's `started` rides in the same transaction when the loop would start it at
    // once: one commit a step instead of two. It still expects `running`, as the gate does. Not
    // while other calls of the turn are still in flight: the last of them to finish chains.
    const othersInFlight = (this.run.inflightCalls ?? []).some((c) => c.callSeq !== inflight.callSeq);
    const next = chain && !tripped && !othersInFlight ? this.nextChained(step, usage) : undefined;
    let started: ReturnType<RunExecutor["startedWrite"]> | undefined;
    try {
      started = next ? this.startedWrite(next) : undefined;
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
        journal: [...outcomeWrite.journal, ...started.entries],
      });
      if (ok) {
        this.writer.commit();
        this.chained = started.calls;
        return;
      }
    }
    // A pause that waited for this call (or came while its outcome was on its way) finishes in
    // the same write when nothing else is in flight: one round trip less before `paused`.
    await this.writeEndingPause(() => outcomeWrite, () => othersInFlight || this.othersInFlight());
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
    await this.serial(() =>
      this.write({
        set: this.callsLeft(inflight.callSeq),
        journal: [callEntry("call.aborted", this.now(), inflight.callSeq, { kind: inflight.kind, name: inflight.name, reason: "not_started" })],
      }),
    );
  }

  /**
   * The calls in flight when the previous worker stopped (one, or several of one turn): each is
   * abandoned (a model call, re-planned from the snapshot), applied (a check found it done, or a
   * person decided), retried with its own idempotency key (all retries at once), or uncertain.
   * Uncertain calls are put to a person one at a time, as `inflight`: the run pauses with the
   * first once the others are settled, and the next is asked after its decision.
   */
  private async recover(): Promise<void> {
    const listed = this.run.inflightCalls?.length ? this.run.inflightCalls : this.run.inflight ? [this.run.inflight] : [];
    if (!listed.length) return;
    const retries: Started[] = [];
    const retryNotes: JournalInput[] = [];
    let uncertain: { inflight: InflightCall; reason: string; note: JournalInput } | undefined;
    for (const call of listed) {
      // A person's decision (`resume --resolve`) is written on `inflight`.
      const inflight = this.run.inflight?.callSeq === call.callSeq ? this.run.inflight : call;
      const action = inflight.action as unknown as Action;
      const tool = action.type === "tool" ? this.tools.get(action.toolName) : undefined;
      const plan = await planRecovery({ inflight, action, tool, cancelling: this.run.status === "cancelling", runId: this.run.id });
      const at = this.now();
      const note: JournalInput = { type: "recovery", at, callSeq: inflight.callSeq, data: { decision: plan.type, name: inflight.name } };
      switch (plan.type) {
        case "abandon":
          await this.serial(() =>
            this.write({
              set: this.callsLeft(inflight.callSeq),
              journal: [note, callEntry("call.aborted", at, inflight.callSeq, { kind: inflight.kind, name: inflight.name, reason: plan.reason })],
            }),
          );
          break;
        case "apply":
          await this.commitOutcome(action, inflight, plan.outcome, undefined, [note, ...(plan.resolved ? [plan.resolved(at)] : [])]);
          break;
        case "retry":
          if (action.type !== "done") {
            retries.push({ action, inflight: { ...inflight, uncertain: false, resolution: undefined } });
            retryNotes.push(note);
          }
          break;
        case "uncertain":
          uncertain ??= { inflight, reason: plan.reason, note };
          break;
      }
    }
    // Only a running run issues calls again, checked with the notes (invariant 1); otherwise the
    // calls and any decision on them stay for the claim after a resume.
    if (retries.length && this.run.status === "running") {
      const retried = new Map(retries.map((r) => [r.inflight.callSeq, r.inflight]));
      const current = this.run.inflight;
      const set: RunPatch = this.run.inflightCalls?.length
        ? { inflightCalls: this.run.inflightCalls.map((c) => retried.get(c.callSeq) ?? c), inflight: (current && retried.get(current.callSeq)) ?? current }
        : { inflight: retries[0].inflight };
      const written = await this.serial(() => this.write({ expect: { status: ["running"] }, set, journal: retryNotes }));
      if (written) await this.performAll(retries);
    }
    // One person's decision at a time: none while another uncertain call still waits for one.
    if (!uncertain || uncertain.inflight.uncertain || this.run.inflight?.uncertain) return;
    const { inflight, reason, note } = uncertain;
    const marked = () => ({
      set: { inflight: { ...inflight, uncertain: true } },
      journal: [note, callEntry("call.uncertain", this.now(), inflight.callSeq, { kind: "tool", name: inflight.name, reason })],
    });
    await this.serial(async () => {
      if (!(await this.writePausing(marked, "uncertain_effect"))) await this.write(marked());
    });
  }
}


function outcomeJson(outcome: Outcome): Json {
  if (outcome.type === "model") return { text: outcome.result.text, toolCalls: outcome.result.toolCalls as unknown as Json, finishReason: outcome.result.finishReason };
  if (outcome.ok) return outcome.output;
  return { error: outcome.error, message: outcome.message };
}
