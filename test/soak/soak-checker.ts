import type { CommandRecord, EffectRecord, JournalEntry, RunRecord, Store } from "../../src/index.js";
import { commandTransitions, isLegalEdge, type ControlCommandType, type RunStatus } from "../../src/engine/status.js";
import { planFor } from "../crash/agents.js";
import type { Ledger } from "../crash/ledger.js";

/**
 * The soak's independent checker: reads what a soak left behind (every run's row, journal,
 * effects and commands through a store opened for it alone, and the ledger the tools wrote to)
 * and lists every broken promise. It knows the lifecycle table (status.ts) and what each prompt
 * asks for (`planFor`), and nothing of the runtime that did the work.
 */

export interface SoakFigures {
  runs: number;
  byStatus: Record<string, number>;
  journalEntries: number;
  toolCallsChecked: number;
  ledgerRows: number;
  effects: number;
  compensations: number;
  commands: number;
  commandOutcomes: Record<string, number>;
  messagesQueued: number;
  messagesDelivered: number;
}

/** Which promise a violation breaks (a test may name the rule it asserts). */
export type SoakRule =
  | "store"
  | "stuck"
  | "failed"
  | "journal"
  | "status-history"
  | "pause-gate"
  | "call-lifecycle"
  | "plan"
  | "effects"
  | "compensation"
  | "command-outcome"
  | "command-position"
  | "answer"
  | "messages"
  | "ledger";

export interface SoakViolation {
  rule: SoakRule;
  runId: string;
  message: string;
}

export interface SoakCheck {
  violations: SoakViolation[];
  figures: SoakFigures;
}

/** One line per violation, for logs. */
export function describeViolation(violation: SoakViolation): string {
  return `[${violation.rule}] ${violation.runId}: ${violation.message}`;
}

type Problem = Omit<SoakViolation, "runId">;
const v = (rule: SoakRule, message: string): Problem => ({ rule, message });

const activeStatuses: readonly RunStatus[] = ["queued", "running", "pausing", "cancelling"];
const callEnds = new Set(["call.completed", "call.failed", "call.aborted", "call.uncertain"]);

function bump(counts: Record<string, number>, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

function countBy(keys: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return counts;
}

/** The ledger's rows of one kind, by run. */
function byRun<T extends { runId: string }>(rows: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const row of rows) map.set(row.runId, [...(map.get(row.runId) ?? []), row]);
  return map;
}

/** The outcome a control entry may record from the status the journal shows at that position. */
function outcomeFits(command: ControlCommandType, outcome: string, status: RunStatus): boolean {
  const rule = commandTransitions[command];
  if (outcome === "requested" || outcome === "applied") return rule.from.includes(status);
  if (outcome === "already_holds") return rule.holds.includes(status);
  if (outcome.startsWith("refused: ")) return !rule.from.includes(status) || outcome !== "refused: illegal_transition";
  return true;
}

/**
 * Checks every run in the store. `expectedRuns` are the ids the driver started (the store must
 * hold exactly those); with `allowPaused` a run may be left paused, otherwise every run must
 * have ended.
 */
export async function checkSoak(store: Store, ledger: Ledger, expectedRuns: readonly string[], options: { allowPaused?: boolean } = {}): Promise<SoakCheck> {
  const violations: SoakViolation[] = [];
  const figures: SoakFigures = {
    runs: 0,
    byStatus: {},
    journalEntries: 0,
    toolCallsChecked: 0,
    ledgerRows: 0,
    effects: 0,
    compensations: 0,
    commands: 0,
    commandOutcomes: {},
    messagesQueued: 0,
    messagesDelivered: 0,
  };
  const runs = await store.listRuns({ limit: 1_000_000 });
  const stored = new Set(runs.map((r) => r.id));
  for (const id of expectedRuns) if (!stored.has(id)) violations.push({ rule: "store", runId: id, message: "started but not in the store" });
  const expected = new Set(expectedRuns);
  for (const run of runs) if (!expected.has(run.id)) violations.push({ rule: "store", runId: run.id, message: "in the store but never started" });

  const idempotentAttempts = ledger.idempotentAttempts();
  const idempotentWrites = byRun(ledger.idempotentWrites());
  const appends = byRun(ledger.appends());
  const drafts = byRun(ledger.drafts());
  const compensations = byRun(ledger.compensations());
  const compensationAttempts = ledger.compensationAttempts();
  figures.ledgerRows = [...idempotentWrites.values(), ...appends.values(), ...drafts.values()].reduce((n, rows) => n + rows.length, 0);
  figures.compensations = [...compensations.values()].reduce((n, rows) => n + rows.length, 0);

  for (const run of runs) {
    figures.runs += 1;
    bump(figures.byStatus, run.status);
    const journal = await store.readJournal(run.id, { limit: 10_000_000 });
    figures.journalEntries += journal.length;
    const problems = checkRun(run, journal, await store.listEffects(run.id), await store.listCommands(run.id), figures, options);
    problems.push(
      ...checkLedger(run, journal, {
        idempotentWrites: idempotentWrites.get(run.id) ?? [],
        idempotentAttempts,
        appends: appends.get(run.id) ?? [],
        drafts: drafts.get(run.id) ?? [],
        compensations: compensations.get(run.id) ?? [],
        compensationAttempts,
      }),
    );
    violations.push(...problems.map((p) => ({ ...p, runId: run.id, message: `(${run.status}) ${p.message}` })));
  }
  return { violations, figures };
}

function checkRun(run: RunRecord, journal: readonly JournalEntry[], effects: readonly EffectRecord[], commands: readonly CommandRecord[], figures: SoakFigures, options: { allowPaused?: boolean }): Problem[] {
  const problems: Problem[] = [];
  if (activeStatuses.includes(run.status)) problems.push(v("stuck", `left ${run.status}: stuck`));
  if (run.status === "paused" && !options.allowPaused) problems.push(v("stuck", `left paused${run.inflight?.uncertain ? ` with call ${run.inflight.callSeq} uncertain` : ""}`));
  if (run.status === "failed") problems.push(v("failed", `failed: ${JSON.stringify(run.error)}`));

  // The journal: seq 1..n without a gap, the run's own count, and it starts with the creation.
  journal.forEach((entry, i) => {
    if (entry.seq !== i + 1) problems.push(v("journal", `journal entry ${i + 1} has seq ${entry.seq}`));
  });
  if (journal.length !== run.journalSeq) problems.push(v("journal", `journal has ${journal.length} entries, the run says ${run.journalSeq}`));
  if (journal[0]?.type !== "run.created") problems.push(v("journal", `journal starts with ${journal[0]?.type}, not run.created`));

  // Walk the status history: each change starts where the last ended, along a legal edge; no call
  // starts unless the run is running; control entries fit the status they were recorded at.
  let status: RunStatus = "queued";
  const started = new Map<number, JournalEntry>();
  const ended = new Map<number, JournalEntry[]>();
  /** The run's status when each call's first end was journaled. */
  const statusAtEnd = new Map<number, RunStatus>();
  const controlAt = new Map<string, { seq: number; status: RunStatus; outcome: string }>();
  for (const entry of journal) {
    if (entry.type === "status") {
      const from = entry.data.from as RunStatus;
      const to = entry.data.to as RunStatus;
      if (from !== status) problems.push(v("status-history", `status entry ${entry.seq} moves from ${from}, but the run was ${status}`));
      if (!isLegalEdge(from, to)) problems.push(v("status-history", `status entry ${entry.seq}: ${from} → ${to} is not a legal edge`));
      status = to;
    } else if (entry.type === "call.started") {
      if (status !== "running") problems.push(v("pause-gate", `call ${entry.callSeq} started at entry ${entry.seq} while the run was ${status}`));
      if (started.has(entry.callSeq ?? -1)) problems.push(v("call-lifecycle", `call ${entry.callSeq} started twice`));
      started.set(entry.callSeq ?? -1, entry);
    } else if (callEnds.has(entry.type)) {
      if (!started.has(entry.callSeq ?? -1)) problems.push(v("call-lifecycle", `call ${entry.callSeq} ended (${entry.type}) at entry ${entry.seq} without a start`));
      ended.set(entry.callSeq ?? -1, [...(ended.get(entry.callSeq ?? -1) ?? []), entry]);
      if (!statusAtEnd.has(entry.callSeq ?? -1)) statusAtEnd.set(entry.callSeq ?? -1, status);
    } else if (entry.type === "control") {
      const command = entry.data.command as ControlCommandType;
      const outcome = String(entry.data.outcome);
      if (!outcomeFits(command, outcome, status)) problems.push(v("command-position", `control entry ${entry.seq}: ${command} recorded "${outcome}" while the run was ${status}`));
      const id = String(entry.data.commandId);
      if (controlAt.has(id)) problems.push(v("command-outcome", `command ${id} has two control entries`));
      controlAt.set(id, { seq: entry.seq, status, outcome });
    }
  }
  if (status !== run.status) problems.push(v("status-history", `the journal's status history ends ${status}, the run is ${run.status}`));
  for (const [callSeq, entry] of started) {
    const ends = ended.get(callSeq) ?? [];
    if (ends.length !== 1) problems.push(v("call-lifecycle", `call ${callSeq} (${String(entry.data.name)}) has ${ends.length} outcomes: ${ends.map((e) => e.type).join(", ")}`));
  }

  // Tool calls: the completed ones are the prompt's plan, in order, each once; none failed or was cut off.
  const plan = planFor(String(run.input));
  const completedTools: { callSeq: number; name: string; input: unknown }[] = [];
  for (const [callSeq, entry] of started) {
    if (entry.data.kind !== "tool") continue;
    const end = ended.get(callSeq)?.[0];
    // A halt that lands between a call's `started` (journaled with the model's answer) and its
    // start: the call never began, and the run makes it again as a new call once resumed. Only
    // that, while the run is halted; the ledger check below shows it never ran.
    if (end?.type === "call.aborted" && end.data.reason === "not_started" && statusAtEnd.get(callSeq) === "halted") continue;
    if (end?.type !== "call.completed") problems.push(v("call-lifecycle", `tool call ${callSeq} (${String(entry.data.name)}) ended ${end?.type ?? "never"}`));
    else completedTools.push({ callSeq, name: String(entry.data.name), input: entry.data.input });
  }
  completedTools.sort((a, b) => a.callSeq - b.callSeq);
  figures.toolCallsChecked += completedTools.length;
  completedTools.forEach((call, i) => {
    const planned = plan[i];
    if (!planned || planned.toolName !== call.name || JSON.stringify(planned.input) !== JSON.stringify(call.input)) {
      problems.push(v("plan", `completed tool call #${i + 1} (call ${call.callSeq}) is ${call.name} ${JSON.stringify(call.input)}, the plan says ${planned ? `${planned.toolName} ${JSON.stringify(planned.input)}` : "nothing"}`));
    }
  });
  if (run.status === "completed") {
    if (completedTools.length !== plan.length) problems.push(v("plan", `completed after ${completedTools.length} of ${plan.length} planned tool calls`));
    const text = JSON.stringify(run.output);
    if (!text.includes(`from ${plan.length} tool results`)) problems.push(v("plan", `output ${text.slice(0, 120)} does not answer from ${plan.length} tool results`));
  }

  // Effects: one per completed compensable call; a cancelled run's are all compensated, once each, newest first.
  figures.effects += effects.length;
  const drafts = completedTools.filter((c) => c.name === "publish_draft").map((c) => c.callSeq);
  const effectSeqs = effects.map((e) => e.callSeq).sort((a, b) => a - b);
  if (JSON.stringify(effectSeqs) !== JSON.stringify(drafts)) problems.push(v("effects", `effects for calls ${effectSeqs.join(",")}, completed publish_draft calls ${drafts.join(",")}`));
  const succeeded = countBy(journal.filter((e) => e.type === "compensation.succeeded").map((e) => String(e.callSeq)));
  // An undo a halt interrupted starts again, with its key, once the halt is lifted: the order is that of first starts.
  const startedOrder = [...new Set(journal.filter((e) => e.type === "compensation.started").map((e) => e.callSeq ?? -1))];
  if (run.status === "cancelled") {
    for (const effect of effects) {
      if (effect.state !== "compensated") problems.push(v("compensation", `effect of call ${effect.callSeq} is ${effect.state} after the cancel`));
      if (succeeded.get(String(effect.callSeq)) !== 1) problems.push(v("compensation", `effect of call ${effect.callSeq} has ${succeeded.get(String(effect.callSeq)) ?? 0} compensation.succeeded entries`));
    }
    const newestFirst = [...effectSeqs].sort((a, b) => b - a);
    if (JSON.stringify(startedOrder) !== JSON.stringify(newestFirst)) problems.push(v("compensation", `compensations started in order ${startedOrder.join(",")}, not newest first ${newestFirst.join(",")}`));
  } else {
    for (const effect of effects) if (effect.state !== "done") problems.push(v("effects", `effect of call ${effect.callSeq} is ${effect.state} in a run that was not cancelled`));
    if (startedOrder.length) problems.push(v("compensation", `compensations started in a run that was not cancelled`));
  }

  // Commands: each has exactly one recorded outcome, shows in the journal, and fits what the journal shows happened.
  for (const command of commands) {
    figures.commands += 1;
    bump(figures.commandOutcomes, `${command.type}: ${command.outcome ?? "pending"}`);
    if (command.appliedAt === null || command.outcome === null) {
      problems.push(v("command-outcome", `command ${command.id} (${command.type}) has no outcome`));
      continue;
    }
    const at = controlAt.get(command.id);
    if (!at) {
      problems.push(v("command-outcome", `command ${command.id} (${command.type}) is not in the journal`));
      continue;
    }
    if (at.outcome !== "requested" && at.outcome !== command.outcome) problems.push(v("command-outcome", `command ${command.id}: journal says ${at.outcome}, the command ${command.outcome}`));
    const after = journal.filter((e) => e.seq > at.seq && e.type === "status").map((e) => e.data.to as RunStatus);
    if (command.outcome === "applied") {
      // An approval decision changes no status by itself (the run continues once every call is decided).
      // An unhalt sends a run the halt stopped mid-cancel back to cancelling.
      const reached = ({ pause: ["paused"], resume: ["running"], cancel: ["cancelled"], halt: ["halted"], unhalt: ["paused", "cancelling"] } as Partial<Record<string, RunStatus[]>>)[command.type];
      if (reached && !reached.some((s) => after.includes(s))) problems.push(v("command-outcome", `command ${command.id} (${command.type}) applied, but the run never became ${reached.join(" or ")} after it`));
    }
    if (command.outcome === "superseded: cancel" && !after.includes("cancelling")) problems.push(v("command-outcome", `command ${command.id} superseded by a cancel that the journal does not show`));
  }
  for (const id of controlAt.keys()) if (!commands.some((c) => c.id === id)) problems.push(v("command-outcome", `control entry for ${id} without a command row`));

  // Messages sent with `say`: each queued once, delivered at most once, never before it was queued.
  const queued = new Map<string, number>();
  for (const entry of journal) {
    const id = String(entry.data.id);
    if (entry.type === "message.queued") {
      figures.messagesQueued += 1;
      if (queued.has(id)) problems.push(v("messages", `message ${id} queued twice`));
      queued.set(id, 0);
    } else if (entry.type === "message.delivered") {
      figures.messagesDelivered += 1;
      const times = queued.get(id);
      if (times === undefined) problems.push(v("messages", `message ${id} delivered at entry ${entry.seq} before it was queued`));
      else if (times > 0) problems.push(v("messages", `message ${id} delivered twice`));
      queued.set(id, (times ?? 0) + 1);
    }
  }
  if ((run.steering?.messages.length ?? 0) !== queued.size) problems.push(v("messages", `${run.steering?.messages.length ?? 0} steering messages on the run, ${queued.size} queued in the journal`));
  return problems;
}

interface RunLedger {
  idempotentWrites: { key: string }[];
  idempotentAttempts: Map<string, number>;
  appends: { key: string }[];
  drafts: { key: string }[];
  compensations: { key: string; effectKey: string }[];
  compensationAttempts: Map<string, number>;
}

/** The outside world agrees with the journal: every completed call's effect happened exactly once, and no other did. */
function checkLedger(run: RunRecord, journal: readonly JournalEntry[], ledger: RunLedger): Problem[] {
  const problems: Problem[] = [];
  const completed = new Set(journal.filter((e) => e.type === "call.completed").map((e) => e.callSeq));
  const keysOf = (tool: string) =>
    journal.filter((e) => e.type === "call.started" && e.data.name === tool && completed.has(e.callSeq)).map((e) => `${run.id}:${e.callSeq}`);
  const compare = (tool: string, rows: readonly { key: string }[]) => {
    const expected = new Set(keysOf(tool));
    for (const [key, n] of countBy(rows.map((r) => r.key))) {
      if (!expected.has(key)) problems.push(v("ledger", `${tool} ${key} happened in the ledger but is no completed call in the journal`));
      else if (n !== 1) problems.push(v("ledger", `${tool} ${key} happened ${n} times in the ledger`));
    }
    const present = new Set(rows.map((r) => r.key));
    for (const key of expected) if (!present.has(key)) problems.push(v("ledger", `${tool} ${key} completed in the journal but never happened in the ledger`));
  };
  compare("record_fact", ledger.idempotentWrites);
  for (const row of ledger.idempotentWrites) {
    const attempts = ledger.idempotentAttempts.get(row.key) ?? 0;
    if (attempts !== 1) problems.push(v("ledger", `record_fact ${row.key} was executed ${attempts} times (once per idempotency key expected without a crash)`));
  }
  compare("append_log", ledger.appends);
  compare("publish_draft", ledger.drafts);

  const compensated = ledger.compensations.map((c) => c.effectKey);
  if (run.status === "cancelled") {
    const drafts = new Set(ledger.drafts.map((d) => d.key));
    for (const key of drafts) if (!compensated.includes(key)) problems.push(v("ledger", `draft ${key} of a cancelled run was never compensated in the ledger`));
  } else if (compensated.length) {
    problems.push(v("ledger", `drafts ${compensated.join(",")} compensated in the ledger of a run that was not cancelled`));
  }
  // Each undo ran once, or once more for each time the journal shows it started again (a halt
  // interrupted it and its outcome was not back yet); the ledger applied it once by its key.
  const startsOf = countBy(journal.filter((e) => e.type === "compensation.started").map((e) => `${run.id}:${e.callSeq}:compensate`));
  for (const c of ledger.compensations) {
    const attempts = ledger.compensationAttempts.get(c.key) ?? 0;
    const starts = startsOf.get(c.key) ?? 0;
    if (attempts < 1 || attempts > starts) problems.push(v("ledger", `compensation ${c.key} ran ${attempts} times, started ${starts} times in the journal`));
  }
  // A compensation starts again only after something the design allows: its attempt failed
  // (retried with backoff), another worker took the run over (the lease ran out mid-undo: the
  // undo runs again with its key), or a halt stopped it. A start again with none of those before
  // it is a violation, shown with the journal around it.
  const around = (callSeq: number) =>
    journal
      .filter((e) => (e.callSeq === callSeq && e.type.startsWith("compensation.")) || takeover(e) || (e.type === "status" && (e.data.to === "cancelling" || e.data.to === "halted")))
      .map((e) => `${e.seq} ${e.type}${e.type === "compensation.started" ? ` attempt ${String(e.data.attempt)}` : ""}${takeover(e) ? ` from ${String(e.data.previousWorker)} to ${String(e.data.worker)}` : ""}`)
      .join("; ");
  const starts = journal.filter((e) => e.type === "compensation.started");
  for (const [i, start] of starts.entries()) {
    const before = starts.slice(0, i).findLast((e) => e.callSeq === start.callSeq);
    if (!before) continue;
    const between = journal.filter((e) => e.seq > before.seq && e.seq < start.seq);
    const explained = between.some(
      (e) => (e.type === "compensation.failed" && e.callSeq === start.callSeq && e.data.final === false) || takeover(e) || (e.type === "status" && e.data.to === "halted"),
    );
    if (!explained) {
      problems.push(v("compensation", `compensation ${run.id}:${start.callSeq}:compensate started again (entry ${start.seq}) with no failed attempt, takeover or halt since entry ${before.seq} (${around(start.callSeq!)})`));
    }
  }
  return problems;
}

/** Another worker took the run over (its lease had run out, or its process was gone). */
function takeover(entry: JournalEntry): boolean {
  return entry.type === "recovery" && entry.data.previousWorker !== undefined;
}
