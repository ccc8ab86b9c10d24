import type { RunStorage } from "../engine/store.js";
import type { JournalEntry } from "../engine/store.js";
import type { Usage } from "../engine/usage.js";
import type { RunView } from "../server/api-types.js";
import { workerWaitText } from "../engine/worker-wait.js";

export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.floor(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3_600)}h ${String(Math.floor((s % 3_600) / 60)).padStart(2, "0")}m`;
}

export function formatAge(at: number, now: number): string {
  return `${formatDuration(Math.max(0, now - at))} ago`;
}

export function formatTokens(usage: Usage): string {
  return `${(usage.inputTokens + usage.outputTokens).toLocaleString("en-US")} tok`;
}

export function formatCost(usd: number): string {
  return usd === 0 ? "$0" : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function formatTime(at: number): string {
  const d = new Date(at);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function shortJson(value: unknown, max = 80): string {
  const text = JSON.stringify(value) ?? "null";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Fixed-width columns; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join("  ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

export function runsTable(runs: readonly RunView[], now: number): string {
  if (runs.length === 0) return "no runs";
  return table(
    ["RUN", "AGENT", "STATUS", "STEP", "TOKENS", "COST", "UPDATED", "REASON"],
    runs.map((r) => [r.id, r.agent, r.status, String(r.step), formatTokens(r.usage), formatCost(r.usage.costUsd), formatAge(r.updatedAt, now), r.statusReason ?? (r.waitingForWorker ? "waiting for a worker" : "")]),
  );
}

/** What a status means for the person looking at it: the next commands that apply. */
export function nextSteps(run: RunView): string | undefined {
  switch (run.status) {
    case "running":
      return `tether pause ${run.id} · tether cancel ${run.id} · tether attach ${run.id}`;
    case "queued":
      // Not started: there is nothing to pause yet (pause refuses a queued run).
      return `tether cancel ${run.id} · tether attach ${run.id}`;
    case "pausing":
      return `waiting for the call in flight to finish; tether cancel ${run.id} to stop it harder`;
    case "paused":
      if (run.approvals?.some((a) => !a.decision)) return `tether approve ${run.id} [--call N] [--input <json>] · tether reject ${run.id} [--call N] --note <why>`;
      // Refused by a worker whose agent has another version: resume it where its own version runs, or move it onto the new one.
      if (run.statusReason?.startsWith("version_mismatch")) return `tether resume ${run.id} from a worker with version ${run.agentVersion} of ${run.agent} · tether fork ${run.id} --from ${run.step} --current-version · tether cancel ${run.id}`;
      return run.inflight?.uncertain
        ? `tether resume ${run.id} --resolve retry|skip|done · tether cancel ${run.id}`
        : `tether resume ${run.id} [--message <text>] · tether cancel ${run.id}`;
    case "halted":
      return "tether unhalt (then resume or cancel the run)";
    default:
      return undefined;
  }
}

/** What decisions a worker makes about a call in flight when it takes a run over, in words. */
const recoveryDecisions: Record<string, string> = {
  abandon: "was in flight when its worker stopped: dropped unfinished, and made again if the run goes on",
  retry: "was in flight when its worker stopped: retried with the same idempotency key",
  apply: "was in flight when its worker stopped: its outcome is known and taken as it is",
  uncertain: "was in flight when its worker stopped: it may or may not have happened, a person decides",
};

/** A `recovery` entry: a takeover, a decision on a call in flight, or a problem; any other shape as key=value. */
function describeRecovery(d: Record<string, unknown>): string {
  const str = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));
  if (typeof d.previousWorker === "string" && typeof d.worker === "string") {
    const why = d.holderGone ? "its process is gone" : "its lease ended";
    return `taken over by worker ${d.worker} from ${d.previousWorker} (${why}); the run was ${str(d.status)}`;
  }
  if (typeof d.decision === "string" && typeof d.name === "string" && recoveryDecisions[d.decision]) return `${d.name} ${recoveryDecisions[d.decision]}`;
  return Object.entries(d)
    .map(([k, v]) => `${k}=${str(v)}`)
    .join(" ");
}

/** Bytes in B, KB, MB or GB (1024s). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

/**
 * `30d`, `12h`, `45m`, `90s`, `2w` or `500ms` → milliseconds; undefined when unreadable. The unit
 * is required: a bare `30` could mean days or milliseconds, and for `prune` the difference is the
 * whole history.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/.exec(text.trim());
  if (!match) return undefined;
  const scale = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[match[2] as "ms"];
  return Math.round(Number(match[1]) * scale);
}

export function showRun(run: RunView, now: number, storage?: RunStorage): string {
  const lines: string[] = [];
  const row = (label: string, value: string) => lines.push(`${label.padEnd(10)}${value}`);
  lines.push(`run ${run.id}  ${run.agent} v${run.agentVersion}  owner ${run.owner}`);
  row("status", `${run.status}${run.statusReason ? ` (${run.statusReason})` : ""}`);
  if (run.waitingForWorker) row("waiting", workerWaitText(run.waitingForWorker));
  row("step", `${run.step}  (${run.nextCallSeq - 1} calls)`);
  row("usage", `${run.usage.inputTokens.toLocaleString("en-US")} in / ${run.usage.outputTokens.toLocaleString("en-US")} out tokens, ${formatCost(run.usage.costUsd)}`);
  const active = run.activeMs + (run.runningSince !== null ? Math.max(0, now - run.runningSince) : 0);
  row("time", `${formatDuration(active)} active, created ${formatAge(run.createdAt, now)}, updated ${formatAge(run.updatedAt, now)}`);
  const budgets = Object.entries(run.budgets).map(([k, v]) => `${k}=${v}`).join(" ");
  if (budgets) row("budgets", budgets);
  row("input", shortJson(run.input, 100));
  if (run.model) row("model", run.model);
  if (run.forkedFrom) row("forked", `from ${run.forkedFrom.runId} at step ${run.forkedFrom.step}`);
  // Calls made at once (`inflightCalls`) are listed one row each; `inflight` carries a person's pending decision.
  const inflight = run.inflightCalls?.length ? run.inflightCalls.map((c) => (c.callSeq === run.inflight?.callSeq ? run.inflight : c)) : run.inflight ? [run.inflight] : [];
  for (const call of inflight) {
    row("in flight", `${call.kind} ${call.name} (call ${call.callSeq})${call.uncertain ? " UNCERTAIN: may or may not have happened" : ""}`);
  }
  if (run.waitingForMs !== null) row("waiting", `${formatDuration(run.waitingForMs)} on ${run.waitingFor?.kind ?? run.inflight?.kind} ${run.waitingFor?.name ?? run.inflight?.name}`);
  for (const a of run.approvals ?? []) {
    const decided = a.decision ? `${a.decision.decision} by ${a.decision.actor}` : `WAITS FOR APPROVAL${a.expiresAt !== null ? ` (deadline in ${formatDuration(Math.max(0, a.expiresAt - now))}, then ${a.onTimeout})` : ""}`;
    row("approval", `call ${a.callSeq}  ${a.tool} ${shortJson(a.decision?.input ?? a.input, 70)}  ${decided}`);
  }
  const resources = Object.keys(run.resources);
  if (resources.length) row("resources", resources.join(", "));
  if (run.pendingCompensations.length) {
    lines.push("a cancel would undo, newest first:");
    for (const c of run.pendingCompensations) lines.push(`  call ${c.callSeq}  ${c.tool} ${shortJson(c.input, 70)}`);
  }
  if (storage) row("stored", `${formatBytes(storage.bytes)}: ${storage.journalEntries} journal entries, ${storage.messages} messages, ${storage.effects} effects, ${storage.commands} commands`);
  if (run.output !== null) row("output", shortJson(run.output, 200));
  if (run.error) row("error", `${run.error.code}: ${run.error.message}`);
  if (run.report) {
    const r = run.report;
    row("report", `${r.compensated.length} compensated, ${r.failed.length} failed, ${r.uncertain.length} uncertain, ${r.released.length} released${r.kept?.length ? `, ${r.kept.length} kept for forks` : ""}`);
    for (const k of r.kept ?? []) lines.push(`  KEPT ${k.tool} (call ${k.callSeq}): not undone, inherited by ${k.forks.join(", ")}`);
    for (const f of r.failed) lines.push(`  FAILED compensation of ${f.tool} (call ${f.callSeq}): ${f.error}`);
    for (const u of r.uncertain) lines.push(`  UNCERTAIN ${u.tool} (call ${u.callSeq}): ${u.reason}`);
  }
  const next = nextSteps(run);
  if (next) row("next", next);
  return lines.join("\n");
}

const str = (v: unknown) => (v === undefined || v === null ? "" : String(v));

/** One journal entry as one line a person can read. */
export function describeEntry(entry: JournalEntry): string {
  const d = entry.data;
  const call = entry.callSeq !== undefined ? ` (call ${entry.callSeq})` : "";
  switch (entry.type) {
    case "run.created":
      return `created: agent ${str(d.agent)} v${str(d.version)} by ${str(d.owner)}${d.forkedFrom ? `, forked from ${str(d.forkedFrom)} at step ${str(d.fromStep)}` : ""}`;
    case "status":
      return `status ${str(d.from)} → ${str(d.to)}${d.reason ? ` (${str(d.reason)})` : ""}${d.actor ? ` by ${str(d.actor)}` : ""}`;
    case "call.started":
      return d.kind === "tool" ? `▶ tool ${str(d.name)} ${shortJson(d.input, 60)}${call}` : `▶ model ${str(d.name)}${call}`;
    case "call.completed": {
      const usage = d.usage as Partial<Usage> | undefined;
      const tokens = usage ? `, ${(usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)} tok` : "";
      return `✓ ${str(d.kind)} ${str(d.name)} ${formatDuration(Number(d.durationMs ?? 0))}${tokens}${call}`;
    }
    case "call.failed":
      return `✗ ${str(d.kind)} ${str(d.name)} failed: ${str(d.message ?? d.error)}${call}`;
    case "call.aborted":
      return `■ ${str(d.kind)} ${str(d.name)} aborted (${str(d.reason)})${d.durationMs !== undefined ? ` after ${formatDuration(Number(d.durationMs))}` : ""}${call}`;
    case "call.uncertain":
      return `? ${str(d.kind)} ${str(d.name)} is uncertain: ${str(d.reason)}${call}`;
    case "call.resolved":
      return `resolved${call}: ${str(d.decision)} by ${str(d.actor)}`;
    case "call.progress":
      return `… progress ${str(d.progress)}${d.total !== undefined ? `/${str(d.total)}` : ""}${d.message ? ` ${str(d.message)}` : ""}${call}`;
    case "control":
      return `⏵ ${str(d.command)} by ${str(d.actor)}${d.reason ? ` (${str(d.reason)})` : ""}: ${str(d.outcome)}`;
    case "state.message_added":
      return `✎ message from ${str(d.actor)}: ${shortJson(d.content, 70)}`;
    case "state.patched":
      return `✎ state patched by ${str(d.actor)}${d.patch !== undefined ? ` ${shortJson(d.patch, 60)}` : ""}`;
    case "compensation.started":
      return `↺ compensating ${str(d.tool)}${call}, attempt ${str(d.attempt)}`;
    case "compensation.succeeded":
      return `↺ compensated ${str(d.tool)}${call}`;
    case "compensation.failed":
      return `✗ compensation of ${str(d.tool)} failed${d.final ? " (final)" : ", will retry"}: ${str(d.error)}${call}`;
    case "resource.acquired":
    case "resource.released":
    case "resource.release_failed":
      return `${entry.type.replace("resource.", "resource ")} ${str(d.name)}${d.error ? `: ${str(d.error)}` : ""}`;
    case "budget.tripped":
      return `budget tripped: ${str(d.reason)}`;
    case "approval.requested":
      return `approval requested: ${str(d.tool)} ${shortJson(d.input, 60)}${call}`;
    case "approval.decided":
      return `${str(d.decision)} by ${str(d.actor)}: ${str(d.tool)}${d.edited ? ` with ${shortJson(d.approved, 60)} (proposed ${shortJson(d.proposed, 40)})` : ""}${d.note ? ` "${str(d.note)}"` : ""}${call}`;
    case "approval.expired":
      return `approval deadline passed (${str(d.ttlMs)} ms): ${str(d.applied) === "wait" ? "still waiting" : "rejected"}: ${str(d.tool)}${call}`;
    case "recovery":
      return `recovery: ${describeRecovery(d)}`;
    default:
      return `${entry.type} ${shortJson(d)}`;
  }
}

export function journalLine(entry: JournalEntry): string {
  return `#${String(entry.seq).padEnd(4)} ${formatTime(entry.at)}  ${describeEntry(entry)}`;
}

export function isTerminalEntry(entry: JournalEntry): boolean {
  return entry.type === "status" && ["completed", "failed", "cancelled"].includes(String(entry.data.to));
}
