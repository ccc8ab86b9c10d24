import type { Action } from "./agent.js";
import type { EngineContext } from "./engine-context.js";
import { AlreadyDecidedError, IllegalTransitionError, InvalidInputError, NoPendingApprovalError, RunNotFoundError, TetherError } from "./errors.js";
import type { Json, JsonObject } from "./json.js";
import { statusEntry } from "./status-entry.js";
import type { ApprovalDecision, ApprovalRequest, CommandRecord, JournalInput, RunPatch, RunRecord } from "./store.js";
import { controlEntry, newCommand, recordCommandOnly } from "./control-command.js";
import type { AnyTool } from "./tool.js";

/**
 * Approval before a call. A tool that declares `needsApproval` does not start until a person
 * decides: the executor asks (`approval.requested`, the run pauses with `approval_required`), a
 * person approves (the call runs once, with the arguments as approved), rejects with a note (the
 * agent receives the refusal as the call's result) or lets the deadline pass (`onApprovalTimeout`).
 * The run continues once every call of the batch is decided.
 */

export const approvalRequired = "approval_required";

/** Whether the tool may need approval at all: the executor never chains such a call into a commit. */
export function mayNeedApproval(tool: AnyTool | undefined): boolean {
  return tool !== undefined && tool.needsApproval !== undefined && tool.needsApproval !== false;
}

/** Whether this call needs approval. A predicate that throws asks for approval: a person looks rather than nobody. */
export async function needsApproval(tool: AnyTool | undefined, input: Json): Promise<boolean> {
  if (!tool || !mayNeedApproval(tool)) return false;
  if (tool.needsApproval === true) return true;
  const parsed = tool.input.safeParse(input);
  // Arguments the tool would refuse fail as `invalid_input` without anyone's approval.
  if (!parsed.success) return false;
  try {
    return (await (tool.needsApproval as (input: unknown) => boolean | Promise<boolean>)(parsed.data)) === true;
  } catch {
    return true;
  }
}

/** The approval that belongs to this call, if one was requested. */
export function approvalOf(run: RunRecord, action: Action & { type: "tool" }): ApprovalRequest | undefined {
  return run.approvals?.find((a) => a.toolCallId === action.toolCallId && a.tool === action.toolName);
}

/** The approvals once the call's outcome is journaled: it no longer waits for anything. */
export function withoutApproval(run: RunRecord, action: Action): ApprovalRequest[] | undefined {
  if (action.type !== "tool" || !run.approvals?.length) return undefined;
  const own = approvalOf(run, action);
  return own ? run.approvals.filter((a) => a !== own) : undefined;
}

export function undecided(run: RunRecord): ApprovalRequest[] {
  return (run.approvals ?? []).filter((a) => !a.decision);
}

/** What the executor writes to ask for approval of `calls` (each with the call sequence it will take). */
export function approvalRequests(
  run: RunRecord,
  calls: { action: Action & { type: "tool" }; tool: AnyTool; callSeq: number }[],
  now: number,
): { approvals: ApprovalRequest[]; journal: JournalInput[] } {
  const requests = calls.map(({ action, tool, callSeq }): ApprovalRequest => ({
    callSeq,
    toolCallId: action.toolCallId,
    tool: tool.name,
    input: action.input,
    requestedAt: now,
    expiresAt: tool.approvalTtlMs !== undefined ? now + tool.approvalTtlMs : null,
    onTimeout: tool.onApprovalTimeout ?? "reject",
  }));
  const journal = requests.map((r): JournalInput => ({
    type: "approval.requested",
    at: now,
    callSeq: r.callSeq,
    data: { tool: r.tool, toolCallId: r.toolCallId, input: r.input, expiresAt: r.expiresAt, onTimeout: r.onTimeout },
  }));
  return { approvals: [...(run.approvals ?? []), ...requests], journal };
}

export interface ApprovalDecisionInput {
  /** The call to decide; without it, every call waiting for approval (edited arguments need it when several wait). */
  callSeq?: number;
  actor?: string;
  /** Approve with these arguments instead of the proposed ones (checked against the tool's input schema). */
  input?: Json;
  /** Why: required to reject, optional to approve. */
  note?: string;
}

function decidedEntry(request: ApprovalRequest, decision: ApprovalDecision, extra: JsonObject = {}): JournalInput {
  return {
    type: "approval.decided",
    at: decision.at,
    callSeq: request.callSeq,
    data: {
      tool: request.tool,
      toolCallId: request.toolCallId,
      actor: decision.actor,
      decision: decision.decision,
      proposed: request.input,
      ...(decision.decision === "approved"
        ? { approved: decision.input ?? request.input, edited: decision.input !== undefined && JSON.stringify(decision.input) !== JSON.stringify(request.input) }
        : {}),
      note: decision.note ?? null,
      ...extra,
    },
  };
}

/**
 * Why the run's snapshot is stale now (the runtime's stale check); empty when it is not, and
 * undefined when this process does not have the agent's code (the worker that claims the run checks).
 */
export type StaleCheck = (run: RunRecord, now: number) => Promise<string[] | undefined>;

/**
 * The run once these approvals are in: if none waits any more and the run is paused for them,
 * it runs again (a worker claims it), with the status change journaled. The stale check runs
 * first, as on every resume: a stale run stays paused for a person to resume (or force) it, and
 * its decisions hold.
 */
async function continueIfDecided(run: RunRecord, approvals: ApprovalRequest[], now: number, actor: string, stale: StaleCheck | undefined): Promise<{ set: RunPatch; journal: JournalInput[] }> {
  const waiting = approvals.some((a) => !a.decision);
  if (waiting || run.status !== "paused" || !run.statusReason?.startsWith(approvalRequired)) return { set: { approvals }, journal: [] };
  const reasons = stale ? await stale(run, now) : [];
  if (reasons?.length) {
    const statusReason = `stale_snapshot: ${reasons.join("; ")}`;
    return { set: { approvals, statusReason }, journal: [{ type: "recovery", at: now, data: { problem: statusReason, after: "approvals decided", next: "resume (the stale check runs again), or resume with force" } }] };
  }
  return {
    set: { approvals, status: "running", statusReason: null, lease: null, runningSince: now, uncheckedResume: reasons ? null : { actor, at: now } },
    journal: [statusEntry(now, "paused", "running", "approvals decided", { actor })],
  };
}

/** Records a person's decision on one call (or on every call waiting), under the version it was read at. */
export async function decideApproval(
  ctx: EngineContext,
  runId: string,
  verdict: "approved" | "rejected",
  options: ApprovalDecisionInput,
  stale?: StaleCheck,
): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
  // Recorded in the commands table like every control command: applied with the decision, or refused with the code.
  const command = newCommand(ctx, verdict === "approved" ? "approve" : "reject", runId, { actor: options.actor, reason: options.note?.trim() || undefined }, {
    ...(options.callSeq !== undefined ? { callSeq: options.callSeq } : {}),
    ...(options.input !== undefined ? { edited: true } : {}),
  });
  try {
    return await recordDecision(ctx, runId, verdict, options, command, stale);
  } catch (error) {
    if (TetherError.isInstance(error) && error.code !== "run_not_found" && error.code !== "store_error") {
      // Recorded at the status the run has when it is written (a run that keeps moving is read again).
      for (let attempt = 0; attempt < 20; attempt++) {
        const run = await ctx.store.getRun(runId);
        if (!run || (await recordCommandOnly(ctx, run, command, `refused: ${error.code}`))) break;
      }
    }
    throw error;
  }
}

async function recordDecision(
  ctx: EngineContext,
  runId: string,
  verdict: "approved" | "rejected",
  options: ApprovalDecisionInput,
  command: CommandRecord,
  stale: StaleCheck | undefined,
): Promise<{ run: RunRecord; decided: ApprovalRequest[] }> {
  const actor = command.actor;
  if (verdict === "rejected" && !options.note?.trim()) throw new InvalidInputError("a rejection needs a note: the agent receives it as the call's result");
  if (options.note !== undefined && options.note.length > 10_000) throw new InvalidInputError("a note is at most 10,000 characters");
  for (let attempt = 0; ; attempt++) {
    if (attempt > 50) throw new TetherError("store_error", `run ${runId} kept changing while a decision was being recorded`);
    const run = await readOncePaused(ctx, runId);
    const targets = await decisionTargets(ctx, run, options);
    if (verdict === "approved" && options.input !== undefined) {
      if (targets.length !== 1) throw new InvalidInputError(`calls ${targets.map((t) => t.callSeq).join(", ")} wait for approval: edited arguments need the call they are for (callSeq)`);
      checkInput(ctx, run, targets[0], options.input);
    }
    const at = ctx.clock.now();
    const decisions = new Map<ApprovalRequest, ApprovalDecision>();
    for (const target of targets) {
      decisions.set(target, {
        decision: verdict,
        actor,
        at,
        ...(verdict === "approved" && options.input !== undefined ? { input: options.input } : {}),
        ...(options.note?.trim() ? { note: options.note.trim() } : {}),
      });
    }
    const approvals = (run.approvals ?? []).map((a) => (decisions.has(a) ? { ...a, decision: decisions.get(a)! } : a));
    const next = await continueIfDecided(run, approvals, at, actor, stale);
    const result = await ctx.store.update({
      runId,
      expect: { version: run.version },
      set: next.set,
      journal: [controlEntry(ctx, command, "applied"), ...targets.map((t) => decidedEntry(t, decisions.get(t)!, { commandId: command.id })), ...next.journal],
      insertCommand: { ...command, payload: { ...command.payload, calls: targets.map((t) => t.callSeq) }, appliedAt: at, outcome: "applied" },
    });
    if (result.ok) {
      ctx.bus.publishJournal(result.journal);
      return { run: result.run, decided: targets.map((t) => ({ ...t, decision: decisions.get(t)! })) };
    }
  }
}

/**
 * The run, once it is no longer pausing for its approvals (the worker is releasing what a pause
 * releases): a decision that completed the batch before then would find no paused run to continue.
 */
async function readOncePaused(ctx: EngineContext, runId: string): Promise<RunRecord> {
  for (let waited = 0; ; waited++) {
    const run = await ctx.store.getRun(runId);
    if (!run) throw new RunNotFoundError(runId);
    if (run.status !== "pausing" || !undecided(run).length) return run;
    if (waited >= 500) throw new IllegalTransitionError(runId, "decide an approval of", run.status, "it has not finished pausing; decide once it is paused");
    await ctx.clock.sleep(20);
  }
}

/** The approvals a decision applies to, or the refusal that says why there is none. */
async function decisionTargets(ctx: EngineContext, run: RunRecord, options: ApprovalDecisionInput): Promise<ApprovalRequest[]> {
  const all = run.approvals ?? [];
  const waiting = all.filter((a) => !a.decision);
  if (options.callSeq !== undefined) {
    const request = all.find((a) => a.callSeq === options.callSeq);
    if (request?.decision) throw new AlreadyDecidedError(run.id, request.callSeq, request.decision.decision, request.decision.actor);
    if (request) return [request];
    const carried = await lastDecision(ctx, run, options.callSeq);
    if (carried) throw carried;
    throw new NoPendingApprovalError(run.id, options.callSeq, waiting.map((a) => a.callSeq), run.status);
  }
  if (waiting.length) return waiting;
  const last = all.at(-1);
  if (last?.decision) throw new AlreadyDecidedError(run.id, last.callSeq, last.decision.decision, last.decision.actor);
  const carried = await lastDecision(ctx, run);
  if (carried) throw carried;
  throw new NoPendingApprovalError(run.id, undefined, [], run.status);
}

/**
 * A decision already carried out (the call ran or its refusal was delivered) leaves only its
 * journal entry: the run's recent entries say whether this decision would be a second one.
 */
async function lastDecision(ctx: EngineContext, run: RunRecord, callSeq?: number): Promise<AlreadyDecidedError | undefined> {
  const recent = await ctx.store.readJournal(run.id, { afterSeq: Math.max(0, run.journalSeq - 200), limit: 200 });
  const decided = recent.findLast((e) => e.type === "approval.decided" && (callSeq === undefined || e.callSeq === callSeq));
  if (!decided) return undefined;
  return new AlreadyDecidedError(run.id, decided.callSeq ?? 0, String(decided.data.decision), String(decided.data.actor));
}

function checkInput(ctx: EngineContext, run: RunRecord, request: ApprovalRequest, input: Json): void {
  const tool = ctx.agents.get(run.agent)?.tools?.find((t) => t.name === request.tool);
  if (!tool) return;
  const parsed = tool.input.safeParse(input);
  if (parsed.success) return;
  const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(input)"}: ${i.message}`).join("; ");
  throw new InvalidInputError(`the edited arguments do not fit tool ${tool.name}: ${problems}`, parsed.error.issues);
}

/**
 * Applies the deadline of every approval of the run that passed it: `reject` decides it (actor
 * `deadline`), `wait` journals the expiry once and leaves it waiting (the webhooks tell people again).
 */
export async function expireApprovals(ctx: EngineContext, runId: string, stale?: StaleCheck): Promise<RunRecord | undefined> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const run = await ctx.store.getRun(runId);
    if (!run) return undefined;
    // Applied once the pause has finished, as a person's decision is (`readOncePaused`): one that
    // completed the batch while the run was still pausing would find no paused run to continue,
    // and the run would wait for an approval nobody can give. The deadline stays due and is
    // applied at the worker's next check after the pause.
    if (run.status === "pausing") return run;
    const now = ctx.clock.now();
    const due = undecided(run).filter((a) => a.expiresAt !== null && a.expiresAt <= now && !a.expired);
    if (!due.length) return run;
    const journal: JournalInput[] = [];
    const changed = new Map<ApprovalRequest, ApprovalRequest>();
    // The rejections a deadline applies are decisions like a person's: a command by the actor `deadline`.
    const rejecting = due.filter((r) => r.onTimeout !== "wait");
    const command = rejecting.length
      ? newCommand(ctx, "reject", runId, { actor: "deadline", reason: "no decision before the approval deadline (onApprovalTimeout: reject)" }, { calls: rejecting.map((r) => r.callSeq) })
      : undefined;
    if (command) journal.push(controlEntry(ctx, command, "applied"));
    for (const request of due) {
      const ttlMs = request.expiresAt! - request.requestedAt;
      journal.push({ type: "approval.expired", at: now, callSeq: request.callSeq, data: { tool: request.tool, toolCallId: request.toolCallId, ttlMs, applied: request.onTimeout } });
      if (request.onTimeout === "wait") {
        changed.set(request, { ...request, expired: true });
        continue;
      }
      const decision: ApprovalDecision = { decision: "rejected", actor: "deadline", at: now, note: `no decision within ${ttlMs} ms: rejected by the tool's onApprovalTimeout` };
      changed.set(request, { ...request, expired: true, decision });
      journal.push(decidedEntry(request, decision, command ? { commandId: command.id } : {}));
    }
    const approvals = (run.approvals ?? []).map((a) => changed.get(a) ?? a);
    const next = await continueIfDecided(run, approvals, now, "deadline", stale);
    const result = await ctx.store.update({
      runId,
      expect: { version: run.version },
      set: next.set,
      journal: [...journal, ...next.journal],
      ...(command ? { insertCommand: { ...command, appliedAt: now, outcome: "applied" } } : {}),
    });
    if (result.ok) {
      ctx.bus.publishJournal(result.journal);
      return result.run;
    }
  }
  return undefined;
}

/** The earliest deadline among the run's undecided approvals that has not been applied yet. */
export function nextApprovalDeadline(run: RunRecord): number | undefined {
  let next: number | undefined;
  for (const a of undecided(run)) if (a.expiresAt !== null && !a.expired && (next === undefined || a.expiresAt < next)) next = a.expiresAt;
  return next;
}
