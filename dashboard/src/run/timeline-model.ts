import type { Json, JournalEntry, JsonObject, Usage } from "../api/types.js";

/** What became of a call, including what a cancel did to its effect afterwards. */
export type CallStatus = "running" | "completed" | "failed" | "aborted" | "uncertain" | "compensating" | "compensated" | "compensation_failed";

export interface CompensationView {
  state: "compensating" | "compensated" | "failed";
  attempts: number;
  error?: string;
  /** A failed attempt that will be retried. */
  retrying: boolean;
  at: number;
}

export interface CallView {
  callSeq: number;
  kind: "model" | "tool";
  name: string;
  startedAt: number;
  endedAt?: number;
  durationMs?: number;
  /** Tool arguments. */
  input?: Json;
  /** For a model call: how much it was sent. */
  request?: { messages: number; tools: number };
  outcome?: "completed" | "failed" | "aborted" | "uncertain";
  result?: Json;
  /** The result lives in the state's messages at this index (`GET /runs/:id/state`). */
  resultInMessage?: number;
  error?: { code: string; message: string };
  reason?: string;
  usage?: Usage;
  estimated?: boolean;
  /** How much text an aborted model call had streamed. */
  streamedChars?: number;
  /** The text it had streamed (its last 8 KiB), journaled with the abort. */
  partialText?: string;
  partialTextTruncated?: boolean;
  finishReason?: string;
  /** The step the run reached when this call's outcome was committed: fork from here with it. */
  step?: number;
  progress: JsonObject[];
  resolved?: { decision: string; actor: string };
  compensation?: CompensationView;
  /** Seq of the first entry, for ordering. */
  seq: number;
}

export interface MarkerView {
  seq: number;
  at: number;
  kind: "status" | "edit" | "budget" | "recovery" | "resource" | "created" | "approval";
  title: string;
  detail?: string;
  tone: "neutral" | "info" | "warn" | "danger" | "success";
  status?: string;
}

export type TimelineItem = { type: "call"; call: CallView } | { type: "marker"; marker: MarkerView };

export interface AuditEntry {
  seq: number;
  at: number;
  actor: string;
  action: string;
  reason: string | null;
  outcome: string | null;
  detail?: string;
  /** A command recorded as requested, applied by the worker later (when the run got there). */
  appliedAt?: number;
}

export interface Timeline {
  items: TimelineItem[];
  calls: Map<number, CallView>;
  audit: AuditEntry[];
  /** The call in flight now, if any. */
  current?: CallView;
}

function str(value: Json | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

function num(value: Json | undefined): number | undefined {
  return typeof value === "number" ? value : undefined;
}

function usageOf(value: Json | undefined): Usage | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  return {
    inputTokens: num(value.inputTokens) ?? 0,
    outputTokens: num(value.outputTokens) ?? 0,
    cachedInputTokens: num(value.cachedInputTokens) ?? 0,
    costUsd: num(value.costUsd) ?? 0,
  };
}

/** A status a call shows: its own outcome, overridden by what compensation did to its effect. */
export function callStatus(call: CallView): CallStatus {
  if (call.compensation) {
    if (call.compensation.state === "compensated") return "compensated";
    if (call.compensation.state === "failed") return "compensation_failed";
    return "compensating";
  }
  return call.outcome ?? "running";
}

function statusMarker(entry: JournalEntry): MarkerView {
  const from = str(entry.data.from) ?? "?";
  const to = str(entry.data.to) ?? "?";
  const reason = str(entry.data.reason);
  const actor = str(entry.data.actor);
  const by = actor ? ` by ${actor}` : "";
  const titles: Record<string, string> = {
    running: from === "queued" ? "Started" : from === "paused" ? `Resumed${by}` : "Running",
    pausing: "Pausing",
    paused: "Paused",
    cancelling: "Cancelling",
    cancelled: "Cancelled",
    completed: "Completed",
    failed: "Failed",
    halted: `Halted${by}`,
  };
  const tones: Record<string, MarkerView["tone"]> = {
    running: "info",
    pausing: "warn",
    paused: "warn",
    cancelling: "danger",
    cancelled: "neutral",
    completed: "success",
    failed: "danger",
    halted: "danger",
  };
  let detail = reason;
  if (to === "paused" && from === "halted") detail = "halt lifted";
  if (to === "cancelled") {
    const parts = [`${num(entry.data.compensated) ?? 0} compensated`];
    if (num(entry.data.failed)) parts.push(`${entry.data.failed} failed`);
    if (num(entry.data.uncertain)) parts.push(`${entry.data.uncertain} uncertain`);
    detail = parts.join(", ");
  }
  if (to === "failed" && str(entry.data.message)) detail = str(entry.data.message);
  return { seq: entry.seq, at: entry.at, kind: "status", title: titles[to] ?? `${from} → ${to}`, detail, tone: tones[to] ?? "neutral", status: to };
}

/**
 * Folds a run's journal into what the run view shows: one row per call (grouped by callSeq,
 * with its outcome and what a cancel did to it), markers for status changes and human edits,
 * and the audit trail of control commands.
 */
export function buildTimeline(entries: readonly JournalEntry[]): Timeline {
  const items: TimelineItem[] = [];
  const calls = new Map<number, CallView>();
  const audit: AuditEntry[] = [];
  let step = 0;
  let current: CallView | undefined;
  /** Calls asked for approval, by call sequence: a rejected one never starts, so its outcome is the first entry it has. */
  const proposed = new Map<number, { input: unknown; seq: number; at: number }>();
  const marker = (m: MarkerView) => items.push({ type: "marker", marker: m });

  for (const entry of entries) {
    const { data } = entry;
    const callSeq = entry.callSeq;
    let call = callSeq === undefined ? undefined : calls.get(callSeq);
    switch (entry.type) {
      case "run.created": {
        step = num(data.fromStep) ?? 0;
        const forked = str(data.forkedFrom);
        marker({
          seq: entry.seq,
          at: entry.at,
          kind: "created",
          title: forked ? `Forked from ${forked} at step ${step}` : "Created",
          detail: str(data.owner) ? `by ${str(data.owner)}` : undefined,
          tone: "neutral",
        });
        break;
      }
      case "call.started": {
        if (callSeq === undefined) break;
        if (!call) {
          const kind = data.kind === "model" ? "model" : "tool";
          call = {
            callSeq,
            kind,
            name: str(data.name) ?? "?",
            startedAt: entry.at,
            progress: [],
            seq: entry.seq,
            ...(kind === "tool" ? { input: data.input ?? null } : { request: { messages: num(data.messages) ?? 0, tools: num(data.tools) ?? 0 } }),
          };
          calls.set(callSeq, call);
          items.push({ type: "call", call });
        }
        current = call;
        break;
      }
      case "call.completed":
      case "call.failed": {
        if (!call && callSeq !== undefined && data.error === "rejected") {
          const asked = proposed.get(callSeq);
          call = { callSeq, kind: "tool", name: str(data.name) ?? "?", startedAt: asked?.at ?? entry.at, progress: [], seq: asked?.seq ?? entry.seq, input: (asked?.input ?? null) as CallView["input"] };
          calls.set(callSeq, call);
          items.push({ type: "call", call });
        }
        if (!call) break;
        call.outcome = entry.type === "call.completed" ? "completed" : "failed";
        call.endedAt = entry.at;
        call.durationMs = num(data.durationMs);
        call.usage = usageOf(data.usage) ?? call.usage;
        call.finishReason = str(data.finishReason);
        if (entry.type === "call.failed") call.error = { code: str(data.error) ?? "error", message: str(data.message) ?? "" };
        // Only an outcome committed with a snapshot moves the step (a failed model call does not).
        const committed = "resultInMessage" in data || "result" in data;
        if ("resultInMessage" in data) call.resultInMessage = num(data.resultInMessage);
        if ("result" in data) call.result = data.result;
        if (committed) call.step = ++step;
        if (current === call) current = undefined;
        break;
      }
      case "call.aborted": {
        if (!call) break;
        call.outcome = "aborted";
        call.endedAt = entry.at;
        call.durationMs = num(data.durationMs) ?? entry.at - call.startedAt;
        call.reason = str(data.reason);
        call.usage = usageOf(data.usage) ?? call.usage;
        call.estimated = data.estimated === true;
        call.streamedChars = num(data.streamedChars);
        call.partialText = str(data.partialText);
        call.partialTextTruncated = data.partialTextTruncated === true;
        if (current === call) current = undefined;
        break;
      }
      case "call.uncertain":
        if (!call) break;
        call.outcome = "uncertain";
        call.reason = str(data.reason);
        if (current === call) current = undefined;
        break;
      case "call.resolved":
        if (call) call.resolved = { decision: str(data.decision) ?? "?", actor: str(data.actor) ?? "?" };
        break;
      case "call.progress":
        if (call) call.progress.push(data);
        break;
      case "compensation.started":
        if (call) call.compensation = { state: "compensating", attempts: num(data.attempt) ?? 1, retrying: false, at: entry.at };
        break;
      case "compensation.succeeded":
        if (call) call.compensation = { state: "compensated", attempts: num(data.attempts) ?? 1, retrying: false, at: entry.at };
        break;
      case "compensation.failed": {
        if (!call) break;
        const final = data.final !== false;
        call.compensation = {
          state: final ? "failed" : "compensating",
          attempts: num(data.attempts) ?? num(data.attempt) ?? 1,
          error: str(data.error),
          retrying: !final,
          at: entry.at,
        };
        break;
      }
      case "status": {
        marker(statusMarker(entry));
        const settles: Record<string, string> = { paused: "pause", cancelled: "cancel" };
        const command = settles[str(data.to) ?? ""];
        if (command) for (const row of audit) if (row.action === command && row.outcome === "requested" && row.appliedAt === undefined) row.appliedAt = entry.at;
        if (current && (data.to === "paused" || data.to === "halted" || data.to === "cancelled" || data.to === "failed")) current = undefined;
        break;
      }
      case "control": {
        const command = str(data.command) ?? "?";
        const flags = [data.mode && command === "pause" ? `mode ${str(data.mode)}` : "", data.force ? "forced" : "", str(data.resolve) ? `resolve ${str(data.resolve)}` : "", data.message ? "with a message" : "", data.patch ? "with a state patch" : ""]
          .filter(Boolean)
          .join(", ");
        audit.push({
          seq: entry.seq,
          at: entry.at,
          actor: str(data.actor) ?? "?",
          action: command,
          reason: str(data.reason) ?? null,
          outcome: str(data.outcome) ?? null,
          detail: flags || undefined,
        });
        break;
      }
      case "state.message_added":
        marker({ seq: entry.seq, at: entry.at, kind: "edit", title: `${str(data.actor) ?? "someone"} added a message`, detail: str(data.content), tone: "info" });
        audit.push({ seq: entry.seq, at: entry.at, actor: str(data.actor) ?? "?", action: "add message", reason: null, outcome: "applied", detail: str(data.content) });
        break;
      case "state.patched": {
        const actor = str(data.actor) ?? "someone";
        const detail = Array.isArray(data.reasons) ? data.reasons.join("; ") : JSON.stringify(data.patch ?? null);
        marker({ seq: entry.seq, at: entry.at, kind: "edit", title: actor === "onStale" ? "State refreshed by the agent's onStale hook" : `${actor} edited the state`, detail, tone: "info" });
        audit.push({ seq: entry.seq, at: entry.at, actor, action: "edit state", reason: null, outcome: "applied", detail });
        break;
      }
      case "budget.tripped":
        marker({ seq: entry.seq, at: entry.at, kind: "budget", title: "Budget tripped", detail: str(data.reason), tone: "warn" });
        break;
      case "approval.requested":
        if (callSeq !== undefined) proposed.set(callSeq, { input: data.input ?? null, seq: entry.seq, at: entry.at });
        marker({ seq: entry.seq, at: entry.at, kind: "approval", title: `${str(data.tool) ?? "A call"} (call #${entry.callSeq ?? "?"}) needs approval`, detail: JSON.stringify(data.input ?? null), tone: "warn" });
        break;
      case "approval.decided": {
        const decision = str(data.decision) ?? "?";
        const detail = [data.edited ? `with ${JSON.stringify(data.approved)} (proposed ${JSON.stringify(data.proposed)})` : "", str(data.note) ?? ""].filter(Boolean).join(" · ") || undefined;
        marker({ seq: entry.seq, at: entry.at, kind: "approval", title: `${str(data.actor) ?? "someone"} ${decision} ${str(data.tool) ?? "the call"} (call #${entry.callSeq ?? "?"})`, detail, tone: decision === "approved" ? "success" : "danger" });
        audit.push({ seq: entry.seq, at: entry.at, actor: str(data.actor) ?? "?", action: decision === "approved" ? "approve" : "reject", reason: str(data.note) ?? null, outcome: "applied", detail: `call #${entry.callSeq ?? "?"}${data.edited ? ", arguments edited" : ""}` });
        break;
      }
      case "approval.expired":
        marker({ seq: entry.seq, at: entry.at, kind: "approval", title: `Approval deadline passed for ${str(data.tool) ?? "a call"} (call #${entry.callSeq ?? "?"})`, detail: data.applied === "wait" ? "still waiting for a person" : "rejected", tone: "warn" });
        break;
      case "recovery":
        if (data.previousWorker !== undefined) marker({ seq: entry.seq, at: entry.at, kind: "recovery", title: "Recovered by another worker", detail: `${str(data.previousWorker)} → ${str(data.worker)}`, tone: "warn" });
        else if (data.problem !== undefined) marker({ seq: entry.seq, at: entry.at, kind: "recovery", title: "Recovery problem", detail: str(data.problem), tone: "danger" });
        break;
      case "resource.release_failed":
        marker({ seq: entry.seq, at: entry.at, kind: "resource", title: `Releasing ${str(data.name)} failed`, detail: str(data.error), tone: "danger" });
        break;
      default:
        break;
    }
  }
  return { items, calls, audit, current };
}
