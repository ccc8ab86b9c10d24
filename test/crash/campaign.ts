import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createTether, type JournalEntry, type Json, type Runtime, type RunRecord, type Store } from "../../src/index.js";
import { seededRandom, type Random } from "../../src/models/seeded-random.js";
import { crashAgent, crashAgentName, crashFunctionAgent, crashParallelLoopAgent, crashPrompt, type AgentTimings } from "./agents.js";
import type { ChildOptions } from "./child.js";
import { ChildWorker, projectRoot, sleep, waitUntil } from "./child-process.js";
import { crashStore, type CrashStore, type CrashStoreKind } from "./crash-store.js";
import { Ledger } from "./ledger.js";

/**
 * The crash campaign: a child process executes runs; the parent SIGKILLs it at seeded random
 * moments and starts another that recovers them; uncertain effects are resolved from the
 * ledger. What happened is then read back from the journals and the ledger. Assertions live
 * in the test (and the long campaign's CLI); this module only drives and observes.
 */

const childScript = join(projectRoot, "test/crash/child.ts");
const leaseMs = 300;

export interface CampaignOptions {
  dir: string;
  seed: number;
  /** Kill points to reach; batches of runs are started until the campaign has made this many. */
  kills: number;
  runsPerBatch: number;
  /** Tool calls per run, drawn from this range. */
  steps: [number, number];
  /** Kill delay after the child is ready, drawn from this range. */
  killDelayMs: [number, number];
  timings?: Partial<AgentTimings>;
  log?: (line: string) => void;
  /** The agent the runs use: the tool loop (default) or the async-function agent with parallel calls. */
  agent?: string;
  /** Where the runs are kept: SQLite (default) or PostgreSQL (a schema of the campaign's own). */
  store?: CrashStoreKind;
  /**
   * After the seeded delay, wait (up to 10 s) until the store shows a run of this child with a call
   * in flight before the kill, so that a kill lands in work even when a loaded machine starts the
   * child slowly; without it the kill comes at the delay, whatever the child is doing.
   */
  killInFlight?: boolean;
}

export interface KillPoint {
  /** What each run had in flight at the kill, from the journal: a model key, a tool name, or nothing. */
  inFlight: string[];
}

export interface CampaignRunResult {
  runId: string;
  prompt: string;
  status: string;
  output: Json | null;
  expectedOutput: Json | null;
  steps: number;
}

export interface CampaignReport {
  kills: number;
  childStarts: number;
  runs: CampaignRunResult[];
  /** Tool or model name → how often it was in flight at a kill. */
  inFlightAtKill: Record<string, number>;
  uncertainResolutions: { runId: string; callSeq: number; tool: string; decision: "done" | "retry"; reason: string | null }[];
  recoveryDecisions: Record<string, number>;
  /** Idempotent writes attempted more than once (a retry the ledger absorbed). */
  idempotentRetries: number;
  violations: string[];
  durationMs: number;
}

const timingsOf = (options: { timings?: Partial<AgentTimings> }): AgentTimings => ({ tokensPerSecond: 2000, compensateMs: 40, ...options.timings });

/** The parent's view of a store: a control-only runtime (`worker: false`) and the ledger. */
class Observer {
  readonly ledger: Ledger;
  readonly runtime: Runtime;
  private keep = false;

  private constructor(
    readonly location: CrashStore,
    readonly store: Store,
    readonly ledgerPath: string,
    timings: AgentTimings,
  ) {
    this.ledger = new Ledger(ledgerPath);
    this.runtime = createTether({ agents: [crashAgent(this.ledger, timings), crashFunctionAgent(this.ledger, timings), crashParallelLoopAgent(this.ledger, timings)], store: this.store, worker: false });
  }

  static async open(kind: CrashStoreKind, dir: string, name: string, timings: AgentTimings): Promise<Observer> {
    const location = crashStore(kind, dir, name);
    return new Observer(location, await location.open(), join(dir, `${name}-ledger.db`), timings);
  }

  /** Keeps the store's data after `close` (a PostgreSQL schema is otherwise dropped). */
  keepData(): void {
    this.keep = true;
  }

  async runs(ids: readonly string[]): Promise<RunRecord[]> {
    return Promise.all(ids.map((id) => this.runtime.get(id)));
  }

  async journal(runId: string): Promise<JournalEntry[]> {
    const all: JournalEntry[] = [];
    for (;;) {
      const page = await this.store.readJournal(runId, { afterSeq: all.length ? all[all.length - 1].seq : 0, limit: 1000 });
      all.push(...page);
      if (page.length < 1000) return all;
    }
  }

  async close(): Promise<void> {
    await this.runtime.close();
    const kept = await this.location.finish(this.keep);
    if (kept) console.error(`crash campaign: kept ${kept} for inspection`);
    this.ledger.close();
  }
}

function childOptions(observer: Observer, timings: AgentTimings): ChildOptions {
  return { ...observer.location.childLocation, ledgerPath: observer.ledgerPath, leaseMs, ...timings };
}

const settled = (run: RunRecord) => run.status === "completed" || run.status === "failed" || run.status === "cancelled" || run.status === "paused";
const active = (run: RunRecord) => run.status === "queued" || run.status === "running" || run.status === "pausing" || run.status === "cancelling";

const between = (random: Random, [min, max]: [number, number]) => min + Math.floor(random() * (max - min + 1));

export async function runCampaign(options: CampaignOptions): Promise<CampaignReport> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const timings = timingsOf(options);
  const random = seededRandom(options.seed);
  mkdirSync(options.dir, { recursive: true });
  const observer = await Observer.open(options.store ?? "sqlite", options.dir, "crash", timings);
  const report: CampaignReport = {
    kills: 0,
    childStarts: 0,
    runs: [],
    inFlightAtKill: {},
    uncertainResolutions: [],
    recoveryDecisions: {},
    idempotentRetries: 0,
    violations: [],
    durationMs: 0,
  };
  const runIds: string[] = [];
  const prompts = new Map<string, string>();
  try {
    for (let batch = 0; report.kills < options.kills; batch++) {
      const ids: string[] = [];
      for (let i = 0; i < options.runsPerBatch; i++) {
        const prompt = crashPrompt("campaign", options.seed * 1000 + batch * 100 + i, between(random, options.steps));
        const run = await observer.runtime.start(options.agent ?? crashAgentName, prompt);
        ids.push(run.id);
        prompts.set(run.id, prompt);
      }
      runIds.push(...ids);
      await driveToEnd(observer, ids, options, timings, random, report, log);
      log(`batch ${batch}: ${ids.length} runs settled, ${report.kills} kills so far`);
    }
    log(`${runIds.length} runs settled after ${report.kills} kills; running the reference runs`);
    const expected = await referenceOutputs(options, timings, [...prompts.values()]);
    log("reference runs done; verifying");
    for (const run of await observer.runs(runIds)) {
      const prompt = prompts.get(run.id) ?? "";
      report.runs.push({ runId: run.id, prompt, status: run.status, output: run.output, expectedOutput: expected.outputs.get(prompt) ?? null, steps: run.step });
    }
    await verifyCampaign(observer, runIds, prompts, expected.appends, report);
    if (report.violations.length) observer.keepData();
  } catch (error) {
    observer.keepData();
    throw error;
  } finally {
    await observer.close();
  }
  report.durationMs = Date.now() - began;
  return report;
}

/** Kills and restarts children until every run has ended (or is paused for a reason other than an uncertain effect). */
async function driveToEnd(
  observer: Observer,
  ids: string[],
  options: CampaignOptions,
  timings: AgentTimings,
  random: Random,
  report: CampaignReport,
  log: (line: string) => void,
): Promise<void> {
  for (;;) {
    await resolveUncertain(observer, ids, report);
    const runs = await observer.runs(ids);
    if (runs.every((r) => settled(r) && !(r.status === "paused" && r.inflight?.uncertain))) return;
    const child = await ChildWorker.spawn(childScript, childOptions(observer, timings));
    report.childStarts += 1;
    try {
      if (report.kills < options.kills) {
        await sleep(between(random, options.killDelayMs));
        if (options.killInFlight) await waitUntil(async () => (await observer.runs(ids)).some((r) => r.inflight && r.lease?.workerId === `worker-pid-${child.pid}`), "a call in flight", 10_000, 5).catch(() => undefined);
        if (!child.alive) throw new Error(`child ${child.pid} died on its own: ${child.stderr}`);
        if ((await observer.runs(ids)).some(active)) {
          await child.kill();
          report.kills += 1;
          if (report.kills % 10 === 0) log(`${report.kills} kills`);
          continue;
        }
      }
      await waitUntil(async () => (await observer.runs(ids)).every(settled), "every run has ended or paused", 120_000, 20);
      if (!child.alive) throw new Error(`child ${child.pid} died on its own: ${child.stderr}`);
    } finally {
      await child.stop();
      report.violations.push(...child.unhandledRejections);
    }
  }
}

/** A person's decision on each uncertain effect, made by looking in the ledger. */
async function resolveUncertain(observer: Observer, ids: string[], report: CampaignReport): Promise<void> {
  for (const run of await observer.runs(ids)) {
    if (run.status !== "paused" || !run.inflight?.uncertain) continue;
    const { callSeq, name } = run.inflight;
    const key = `${run.id}:${callSeq}`;
    if (name !== "append_log") report.violations.push(`${run.id}: call ${callSeq} of ${name} became uncertain, but only append_log is neither idempotent nor checkable`);
    const applied = observer.ledger.findAppend(key);
    const decision = applied === undefined ? "retry" : "done";
    report.uncertainResolutions.push({ runId: run.id, callSeq, tool: name, decision, reason: run.statusReason });
    await observer.runtime.resume(run.id, {
      actor: "crash-test",
      reason: `ledger ${applied === undefined ? "has no" : "has the"} entry for ${key}`,
      resolve: applied === undefined ? { action: "retry" } : { action: "done", result: applied },
    });
  }
}

/** Outputs (and appended lines) of the same prompts run once more without any kill. */
async function referenceOutputs(options: CampaignOptions, timings: AgentTimings, prompts: string[]): Promise<{ outputs: Map<string, Json | null>; appends: Map<string, string[]> }> {
  const observer = await Observer.open(options.store ?? "sqlite", options.dir, "reference", timings);
  try {
    const byId = new Map<string, string>();
    for (const prompt of prompts) byId.set((await observer.runtime.start(options.agent ?? crashAgentName, prompt)).id, prompt);
    const child = await ChildWorker.spawn(childScript, childOptions(observer, timings));
    try {
      await waitUntil(async () => (await observer.runs([...byId.keys()])).every(settled), "every reference run has ended", 180_000, 50);
    } finally {
      await child.stop();
    }
    if (child.unhandledRejections.length) throw new Error(`the reference run had unhandled rejections: ${child.unhandledRejections.join("; ")}`);
    const outputs = new Map<string, Json | null>();
    for (const run of await observer.runs([...byId.keys()])) outputs.set(byId.get(run.id) ?? "", run.status === "completed" ? run.output : `reference run ${run.status}`);
    return { outputs, appends: appendsByPrompt(observer.ledger, byId) };
  } finally {
    await observer.close();
  }
}

function appendsByPrompt(ledger: Ledger, prompts: Map<string, string>): Map<string, string[]> {
  const byPrompt = new Map<string, string[]>();
  for (const row of ledger.appends()) {
    const prompt = prompts.get(row.runId) ?? row.runId;
    byPrompt.set(prompt, [...(byPrompt.get(prompt) ?? []), row.value]);
  }
  for (const lines of byPrompt.values()) lines.sort();
  return byPrompt;
}

/** Calls in flight when a worker died, read from the journal: `started` with no end before the next worker's takeover. */
export function callsInFlightAtTakeovers(journal: readonly JournalEntry[]): { takeoverIndex: number; callSeq: number; name: string }[] {
  const open = new Map<number, { name: string; executing: boolean }>();
  const found: { takeoverIndex: number; callSeq: number; name: string }[] = [];
  journal.forEach((entry, index) => {
    const seq = entry.callSeq;
    switch (entry.type) {
      case "call.started":
        open.set(seq!, { name: String(entry.data.name), executing: true });
        break;
      case "call.completed":
      case "call.failed":
      case "call.aborted":
        open.delete(seq!);
        break;
      case "call.uncertain":
        if (open.has(seq!)) open.get(seq!)!.executing = false;
        break;
      case "recovery":
        if (seq !== undefined && entry.data.decision === "retry" && open.has(seq)) open.get(seq)!.executing = true;
        if (seq === undefined && entry.data.previousWorker !== undefined) {
          for (const [callSeq, call] of open) if (call.executing) found.push({ takeoverIndex: index, callSeq, name: call.name });
        }
        break;
    }
  });
  return found;
}

async function verifyCampaign(observer: Observer, runIds: string[], prompts: Map<string, string>, expectedAppends: Map<string, string[]>, report: CampaignReport): Promise<void> {
  const v = report.violations;
  const ledger = observer.ledger;
  const idempotentKeys = new Set(ledger.idempotentWrites().map((w) => w.key));
  const appendCounts = countBy(ledger.appends().map((a) => a.key));
  const draftCounts = countBy(ledger.drafts().map((d) => d.key));
  for (const [key, n] of appendCounts) if (n > 1) v.push(`append_log ${key} was applied ${n} times (a silent duplicate)`);
  for (const [key, n] of draftCounts) if (n > 1) v.push(`publish_draft ${key} was applied ${n} times (a silent duplicate)`);
  for (const [, n] of ledger.idempotentAttempts()) if (n > 1) report.idempotentRetries += 1;
  const actualAppends = appendsByPrompt(ledger, prompts);

  for (const runId of runIds) {
    const journal = await observer.journal(runId);
    const ended = new Map<number, number>();
    const completedByTool = new Map<string, Set<string>>();
    for (const entry of journal) {
      if (entry.type === "recovery" && entry.callSeq !== undefined) {
        const decision = `${entry.data.name}:${entry.data.decision}`;
        report.recoveryDecisions[decision] = (report.recoveryDecisions[decision] ?? 0) + 1;
      }
      if (entry.type !== "call.completed" && entry.type !== "call.failed") continue;
      ended.set(entry.callSeq!, (ended.get(entry.callSeq!) ?? 0) + 1);
      if (entry.type === "call.completed") {
        const name = String(entry.data.name);
        if (!completedByTool.has(name)) completedByTool.set(name, new Set());
        completedByTool.get(name)!.add(`${runId}:${entry.callSeq}`);
      }
    }
    for (const [callSeq, n] of ended) if (n > 1) v.push(`${runId}: call ${callSeq} completed ${n} times in the journal`);
    const failedCalls = journal.filter((e) => e.type === "call.failed");
    for (const failed of failedCalls) v.push(`${runId}: call ${failed.callSeq} (${failed.data.name}) failed: ${failed.data.message}`);

    const runKeys = (keys: Iterable<string>) => [...keys].filter((k) => k.startsWith(`${runId}:`)).sort();
    const same = (what: string, ledgerKeys: string[], journalKeys: string[]) => {
      if (JSON.stringify(ledgerKeys) !== JSON.stringify(journalKeys)) {
        v.push(`${runId}: ${what} keys in the ledger (${ledgerKeys.length}) differ from completed calls in the journal (${journalKeys.length})`);
      }
    };
    same("record_fact", runKeys(idempotentKeys), runKeys(completedByTool.get("record_fact") ?? []));
    same("append_log", runKeys(appendCounts.keys()), runKeys(completedByTool.get("append_log") ?? []));
    same("publish_draft", runKeys(draftCounts.keys()), runKeys(completedByTool.get("publish_draft") ?? []));

    for (const inFlight of callsInFlightAtTakeovers(journal)) {
      report.inFlightAtKill[inFlight.name] = (report.inFlightAtKill[inFlight.name] ?? 0) + 1;
      if (inFlight.name !== "append_log") continue;
      const after = journal.slice(inFlight.takeoverIndex);
      const uncertainAt = after.findIndex((e) => e.type === "call.uncertain" && e.callSeq === inFlight.callSeq);
      const endAt = after.findIndex((e) => (e.type === "call.completed" || e.type === "call.failed") && e.callSeq === inFlight.callSeq);
      if (uncertainAt === -1 || (endAt !== -1 && endAt < uncertainAt)) {
        v.push(`${runId}: append_log call ${inFlight.callSeq} was in flight at a kill but was not marked call.uncertain before it ended`);
        continue;
      }
      const pausedAt = after.findIndex((e, i) => i > uncertainAt && e.type === "status" && e.data.to === "paused" && e.data.reason === "uncertain_effect");
      if (pausedAt === -1 || (endAt !== -1 && endAt < pausedAt)) v.push(`${runId}: append_log call ${inFlight.callSeq} was uncertain but the run did not pause with uncertain_effect`);
    }
    const prompt = prompts.get(runId) ?? "";
    if (JSON.stringify(actualAppends.get(prompt) ?? []) !== JSON.stringify(expectedAppends.get(prompt) ?? [])) {
      v.push(`${runId}: appended lines differ from the uninterrupted run of "${prompt}"`);
    }
  }
  for (const resolution of report.uncertainResolutions) {
    if (resolution.reason !== "uncertain_effect") v.push(`${resolution.runId}: paused for an uncertain effect with reason ${resolution.reason}`);
  }
}

function countBy(keys: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return counts;
}

export interface CancelCampaignOptions {
  dir: string;
  seed: number;
  runs: number;
  /** Compensable effects each run completes before it is cancelled. */
  drafts: number;
  kills: number;
  compensateMs: number;
  log?: (line: string) => void;
  store?: CrashStoreKind;
}

export interface CancelCampaignReport {
  kills: number;
  /** The status of each run at each kill, from the store just before it. */
  statusAtKills: string[];
  /** Unhandled rejections the worker children reported (each is a violation). */
  unhandledRejections: string[];
  runs: {
    runId: string;
    status: string;
    effects: { callSeq: number; state: string; attempts: number }[];
    /** callSeqs in the order compensation first started for them. */
    compensationOrder: number[];
    succeededPerEffect: Record<number, number>;
    ledgerCompensations: Record<string, number>;
    ledgerAttempts: Record<string, number>;
    draftKeys: string[];
    report: RunRecord["report"];
  }[];
  durationMs: number;
}

/** Cancels runs with completed compensable effects and SIGKILLs the worker while it compensates. */
export async function runCancelUnderCrash(options: CancelCampaignOptions): Promise<CancelCampaignReport> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const timings = timingsOf({ timings: { compensateMs: options.compensateMs } });
  const random = seededRandom(options.seed);
  mkdirSync(options.dir, { recursive: true });
  const observer = await Observer.open(options.store ?? "sqlite", options.dir, "cancel", timings);
  const report: CancelCampaignReport = { kills: 0, statusAtKills: [], unhandledRejections: [], runs: [], durationMs: 0 };
  try {
    const ids: string[] = [];
    for (let i = 0; i < options.runs; i++) {
      ids.push((await observer.runtime.start(crashAgentName, crashPrompt("cancel", options.seed * 100 + i, options.drafts, 200))).id);
    }
    let child = await ChildWorker.spawn(childScript, childOptions(observer, timings));
    try {
      await waitUntil(async () => {
        for (const id of ids) if ((await observer.store.listEffects(id)).length < options.drafts) return false;
        return true;
      }, `every run has ${options.drafts} completed effects`);
      for (const id of ids) await observer.runtime.cancel(id, { actor: "crash-test", reason: "cancel under crash" });
      for (;;) {
        const since = new Map<string, number>();
        for (const id of ids) since.set(id, (await observer.runtime.get(id)).journalSeq);
        // Kill only after every run still cancelling has finished one compensation since this
        // child started, so each kill interrupts fresh work rather than the same attempt again.
        await waitUntil(
          async () => {
            for (const run of await observer.runs(ids)) {
              if (run.status !== "cancelling") continue;
              const entries = await observer.store.readJournal(run.id, { afterSeq: since.get(run.id) });
              const succeeded = entries.findIndex((e) => e.type === "compensation.succeeded");
              if (succeeded === -1 || !entries.slice(succeeded).some((e) => e.type === "compensation.started")) return false;
            }
            return true;
          },
          "every cancelling run has made progress",
          60_000,
          5,
        );
        const runs = await observer.runs(ids);
        if (report.kills >= options.kills || !runs.some((r) => r.status === "cancelling")) break;
        await sleep(Math.floor(random() * options.compensateMs));
        const statuses = (await observer.runs(ids)).map((r) => r.status);
        if (!statuses.includes("cancelling")) break;
        await child.kill();
        report.unhandledRejections.push(...child.unhandledRejections);
        report.kills += 1;
        report.statusAtKills.push(...statuses);
        log(`cancel campaign: kill ${report.kills} (statuses ${statuses.join(", ")})`);
        child = await ChildWorker.spawn(childScript, childOptions(observer, timings));
      }
      await waitUntil(async () => (await observer.runs(ids)).every(settled), "every cancelled run has ended", 60_000, 20);
    } finally {
      await child.stop();
      report.unhandledRejections.push(...child.unhandledRejections);
    }
    const attempts = observer.ledger.compensationAttempts();
    const compensations = countBy(observer.ledger.compensations().map((c) => c.effectKey));
    const drafts = observer.ledger.drafts();
    for (const run of await observer.runs(ids)) {
      const journal = await observer.journal(run.id);
      const order: number[] = [];
      const succeeded: Record<number, number> = {};
      for (const entry of journal) {
        if (entry.type === "compensation.started" && !order.includes(entry.callSeq!)) order.push(entry.callSeq!);
        if (entry.type === "compensation.succeeded") succeeded[entry.callSeq!] = (succeeded[entry.callSeq!] ?? 0) + 1;
      }
      const effects = await observer.store.listEffects(run.id);
      const draftKeys = drafts.filter((d) => d.runId === run.id).map((d) => d.key);
      report.runs.push({
        runId: run.id,
        status: run.status,
        effects: effects.map((e) => ({ callSeq: e.callSeq, state: e.state, attempts: e.attempts })),
        compensationOrder: order,
        succeededPerEffect: succeeded,
        ledgerCompensations: Object.fromEntries(draftKeys.map((k) => [k, compensations.get(k) ?? 0])),
        ledgerAttempts: Object.fromEntries(draftKeys.map((k) => [k, attempts.get(`${k}:compensate`) ?? 0])),
        draftKeys,
        report: run.report,
      });
    }
  } catch (error) {
    observer.keepData();
    throw error;
  } finally {
    await observer.close();
  }
  report.durationMs = Date.now() - began;
  return report;
}
