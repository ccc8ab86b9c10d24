import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createTether, SqliteStore, type CommandRecord, type Store } from "../../src/index.js";
import { seededRandom, type Random } from "../../src/models/seeded-random.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import type { PgWorkerOptions } from "../cluster/pg-worker.js";
import { crashAgent, crashAgentName, crashPrompt, haltedAgentName } from "../crash/agents.js";
import type { ChildOptions } from "../crash/child.js";
import { ChildWorker, projectRoot, sleep, waitUntil } from "../crash/child-process.js";
import { Ledger } from "../crash/ledger.js";
import { checkSoak, type SoakFigures, type SoakViolation } from "../soak/soak-checker.js";
import type { RaceAction, RaceAnswer, RaceCommand, RaceControllerOptions, ScopeAnswer, ScopeCommand } from "./race-controller.js";

/**
 * Control races across processes: worker processes execute runs of the crash campaign's agent
 * while three controller processes, each a runtime on its own connection, fire conflicting
 * pause / resume / cancel commands on the same runs at the same moment, round after round. Half
 * the runs belong to a second agent whose scope is halted and lifted now and then, by a
 * controller in the same moment as the other commands. Then every paused run is resumed until
 * all have ended, and the store and the ledger are read afresh: the soak's checker, plus what
 * the races promise: each command exactly one recorded outcome, the one its caller was told;
 * the final status the one the outcomes lead to; a halt applied to every run it names.
 */

export type RacesStoreKind = "sqlite" | "postgres";

export interface RacesOptions {
  store: RacesStoreKind;
  dir: string;
  seed: number;
  rounds: number;
  /** Controller processes firing at once. Default 3. */
  controllers?: number;
  /** Worker processes. Default 1 on SQLite, 2 on PostgreSQL. */
  workers?: number;
  /** Runs raced per round. Default 4. */
  runsPerRound?: number;
  /** Runs kept going; an ended one is replaced. Default 10. */
  activeRuns?: number;
  /** Keep the data for inspection when there are violations (default true). */
  keepOnViolations?: boolean;
  log?: (line: string) => void;
}

export interface RacesReport {
  store: RacesStoreKind;
  seed: number;
  rounds: number;
  /** A run raced in a round: all controllers fired a command at it at the same moment. */
  races: number;
  /** Halts and unhalts of the second agent's scope, fired with a round's commands. */
  scopeCommands: Record<string, number>;
  /** Runs a halt stopped, and runs an unhalt sent back to cancelling. */
  haltedRuns: number;
  cancellingAfterUnhalt: number;
  runs: number;
  commands: number;
  /** How the callers were answered: `ok` or the error code. */
  answers: Record<string, number>;
  /** The outcomes recorded in the commands table, by command type. */
  outcomes: Record<string, number>;
  /** Between the first and the last command of one race, as recorded (createdAt): median and max. */
  spreadMs: { p50: number; max: number };
  figures: SoakFigures;
  violations: SoakViolation[];
  durationMs: number;
  kept?: string;
}

const actionWeights: [RaceAction, number][] = [
  ["pause", 36],
  ["pause-boundary", 12],
  ["resume", 46],
  ["cancel", 6],
];

function pickAction(random: Random): RaceAction {
  let r = random() * actionWeights.reduce((n, [, w]) => n + w, 0);
  for (const [action, weight] of actionWeights) {
    r -= weight;
    if (r < 0) return action;
  }
  return "resume";
}

const commandType: Record<RaceAction, CommandRecord["type"]> = { pause: "pause", "pause-boundary": "pause", resume: "resume", cancel: "cancel" };
const answerFits: Record<CommandRecord["type"], readonly string[]> = {
  pause: ["pausing", "paused"],
  resume: ["running", "queued"],
  cancel: ["cancelling", "cancelled"],
  halt: ["halted"],
  unhalt: ["paused"],
  // Approval decisions are not among the races' actions.
  approve: ["paused", "running"],
  reject: ["paused", "running"],
};
const ended = ["completed", "failed", "cancelled"];
const timings = { tokensPerSecond: 400, compensateMs: 10 };
/** In a round, the chance that a controller also halts the second agent's scope (or lifts its halt). */
const scopeChance = 0.2;

export async function runRaces(options: RacesOptions): Promise<RacesReport> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  const random = seededRandom(options.seed);
  // Its own stream, drawn the same number of times every round: which rounds halt or lift the
  // halt depends on the seed alone, not on how many runs ended in between.
  const scopeRandom = seededRandom(options.seed + 7_919);
  const controllerCount = options.controllers ?? 3;
  const workerCount = options.workers ?? (options.store === "sqlite" ? 1 : 2);
  const runsPerRound = options.runsPerRound ?? 4;
  const activeRuns = options.activeRuns ?? 10;
  mkdirSync(options.dir, { recursive: true });
  const ledgerPath = join(options.dir, "ledger.db");
  const dbPath = join(options.dir, "tether.db");
  const pg: TempPostgres | undefined = options.store === "postgres" ? tempPostgres("races") : undefined;
  const openedStores: Store[] = [];
  const openStore = async (): Promise<Store> => {
    const store = pg ? await pg.open().open() : new SqliteStore({ path: dbPath });
    openedStores.push(store);
    return store;
  };
  const ledger = new Ledger(ledgerPath);
  const store = await openStore();
  const starter = createTether({ agents: [crashAgent(ledger, timings), crashAgent(ledger, timings, haltedAgentName)], store, worker: false });

  const children: ChildWorker[] = [];
  const violations: SoakViolation[] = [];
  const issued = new Map<string, { runId: string; round: number; action: RaceAction; answer?: RaceAnswer }>();
  const runIds: string[] = [];
  const active = new Set<string>();
  let races = 0;
  let halted = false;
  const scopeIssued: { command: ScopeCommand; round: number; answer?: ScopeAnswer }[] = [];
  let promptSeed = options.seed * 100_000;
  let kept: string | undefined;

  try {
    for (let i = 0; i < workerCount; i++) {
      children.push(
        pg
          ? await ChildWorker.spawn(join(projectRoot, "test/cluster/pg-worker.ts"), { url: pg.url, schema: pg.schema, ledgerPath, leaseMs: 2_000, concurrency: 50, ...timings } satisfies PgWorkerOptions)
          : await ChildWorker.spawn(join(projectRoot, "test/crash/child.ts"), { dbPath, ledgerPath, leaseMs: 2_000, ...timings } satisfies ChildOptions),
      );
    }
    const controllerOptions: RaceControllerOptions = pg ? { url: pg.url, schema: pg.schema, ledgerPath } : { dbPath, ledgerPath };
    const controllers = await Promise.all(Array.from({ length: controllerCount }, () => ChildWorker.spawn(join(projectRoot, "test/races/race-controller.ts"), controllerOptions)));
    children.push(...controllers);

    for (let round = 0; round < options.rounds; round++) {
      while (active.size < activeRuns) {
        const steps = 30 + Math.floor(random() * 31);
        // A halted agent starts no run: while its halt holds, new runs are the first agent's.
        const agent = !halted && random() < 0.5 ? haltedAgentName : crashAgentName;
        const run = await starter.start(agent, crashPrompt("campaign", promptSeed++, steps));
        runIds.push(run.id);
        active.add(run.id);
      }
      const raced = [...active].sort(() => random() - 0.5).slice(0, runsPerRound);
      races += raced.length;
      const batches = controllers.map((_, c) =>
        raced.map((runId): RaceCommand => {
          const actor = `racer-${c}-r${round}-${runId}`;
          const action = pickAction(random);
          issued.set(actor, { runId, round, action });
          return { runId, action, actor };
        }),
      );
      const scope: ScopeCommand[] = [];
      const [scopeDraw, scopeBy] = [scopeRandom(), Math.floor(scopeRandom() * controllers.length)];
      if (scopeDraw < scopeChance) {
        const action = halted ? "unhalt" : "halt";
        scope.push({ action, agent: haltedAgentName, actor: `racer-scope-r${round}-${action}` });
        scopeIssued.push({ command: scope[0], round });
      }
      // Every controller fires at the same wall-clock moment, a little ahead so each has the message.
      const at = Date.now() + 60;
      const replies = controllers.map(
        (controller, c) =>
          new Promise<{ answers: RaceAnswer[]; scopeAnswers: ScopeAnswer[] }>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`controller ${controller.pid} did not answer round ${round} in 30 s: ${controller.stderr}`)), 30_000);
            const stop = controller.onMessage((message) => {
              if (message.type !== "fired" || message.round !== round) return;
              clearTimeout(timer);
              stop();
              resolve({ answers: message.answers as RaceAnswer[], scopeAnswers: (message.scopeAnswers ?? []) as ScopeAnswer[] });
            });
            controller.send({ type: "fire", round, at, commands: batches[c], scope: c === scopeBy ? scope : [] });
          }),
      );
      const replied = await Promise.all(replies);
      for (const answer of replied.flatMap((r) => r.answers)) issued.get(answer.actor)!.answer = answer;
      for (const answer of replied.flatMap((r) => r.scopeAnswers)) {
        scopeIssued.find((s) => s.command.actor === answer.actor)!.answer = answer;
        if (answer.ok) halted = answer.action === "halt";
      }
      for (const id of active) if (ended.includes((await starter.get(id)).status)) active.delete(id);
      if (round % 50 === 49) log(`${options.store}: ${round + 1} rounds, ${runIds.length} runs, ${issued.size} commands`);
      await sleep(Math.floor(random() * 80));
    }

    if (halted) await starter.unhalt({ agent: haltedAgentName, actor: "drain" });
    log(`${options.store}: draining ${runIds.length} runs`);
    await waitUntil(
      async () => {
        let open = 0;
        for (const id of runIds) {
          const run = await starter.get(id);
          if (run.status === "paused" && !run.inflight?.uncertain) await starter.resume(id, { actor: "drain" }).catch(() => undefined);
          if (!ended.includes(run.status)) open += 1;
        }
        return open === 0;
      },
      "every run has ended",
      180_000,
      200,
    ).catch((error: unknown) => violations.push({ rule: "stuck", runId: "*", message: (error as Error).message }));
  } catch (error) {
    // A campaign that could not run leaves no schema behind.
    await Promise.all(children.map((c) => c.stop()));
    await starter.close();
    if (pg) await pg.cleanup();
    else for (const opened of openedStores) await opened.close();
    throw error;
  }
  await Promise.all(children.map((c) => c.stop()));
  await starter.close();
  for (const child of children) if (/unhandled rejection/.test(child.stderr)) violations.push({ rule: "failed", runId: "*", message: `process ${child.pid}: ${child.stderr.slice(-600)}` });

  const checkStore = await openStore();
  const checkLedger = new Ledger(ledgerPath);
  const check = await checkSoak(checkStore, checkLedger, runIds);
  violations.push(...check.violations);

  // What the races promise on top of the soak's rules.
  const answers: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const spreads: number[] = [];
  for (const runId of runIds) {
    const commands = await checkStore.listCommands(runId);
    const run = (await checkStore.getRun(runId))!;
    const ours = commands.filter((c) => c.actor.startsWith("racer-"));
    for (const command of ours) outcomes[`${command.type}: ${command.outcome}`] = (outcomes[`${command.type}: ${command.outcome}`] ?? 0) + 1;
    const byActor = new Map<string, CommandRecord[]>();
    for (const command of ours) byActor.set(command.actor, [...(byActor.get(command.actor) ?? []), command]);
    const byRound = new Map<number, number[]>();
    for (const [actor, sent] of issued) {
      if (sent.runId !== runId) continue;
      const rows = byActor.get(actor) ?? [];
      const answer = sent.answer;
      const answerKey = answer ? (answer.ok ? "ok" : (answer.code ?? "?")) : "none";
      answers[answerKey] = (answers[answerKey] ?? 0) + 1;
      if (rows.length !== 1) {
        violations.push({ rule: "command-outcome", runId, message: `${actor} (${sent.action}) has ${rows.length} command rows` });
        continue;
      }
      const row = rows[0];
      if (row.type !== commandType[sent.action]) violations.push({ rule: "command-outcome", runId, message: `${actor} sent ${sent.action}, recorded ${row.type}` });
      byRound.set(sent.round, [...(byRound.get(sent.round) ?? []), row.createdAt]);
      if (!answer) violations.push({ rule: "answer", runId, message: `${actor} (${sent.action}) got no answer` });
      else if (!answer.ok && row.outcome !== `refused: ${answer.code}`) violations.push({ rule: "answer", runId, message: `${actor} (${sent.action}) was told ${answer.code}, recorded ${row.outcome}` });
      else if (answer.ok && row.outcome?.startsWith("refused")) violations.push({ rule: "answer", runId, message: `${actor} (${sent.action}) was told ok, recorded ${row.outcome}` });
      else if (answer.ok && !answerFits[row.type].includes(answer.status ?? "")) {
        violations.push({ rule: "answer", runId, message: `${actor} (${sent.action}, recorded ${row.outcome}) was answered with the run ${answer.status}` });
      }
    }
    for (const times of byRound.values()) spreads.push(Math.max(...times) - Math.min(...times));
    const cancelApplied = commands.some((c) => c.type === "cancel" && c.outcome === "applied");
    if (run.status === "cancelled" && !cancelApplied) violations.push({ rule: "command-outcome", runId, message: "cancelled, but no cancel command has the outcome applied" });
    if (cancelApplied && run.status !== "cancelled") violations.push({ rule: "command-outcome", runId, message: `a cancel was applied, but the run ended ${run.status}` });
  }
  // A halt or unhalt: answered, and applied to every run it says it moved (the soak's checker saw those runs become halted, paused or cancelling after it).
  const scopeCommands: Record<string, number> = {};
  let haltedRuns = 0;
  let cancellingAfterUnhalt = 0;
  for (const { command, answer } of scopeIssued) {
    const key = `${command.action}: ${answer ? (answer.ok ? "ok" : answer.code) : "no answer"}`;
    scopeCommands[key] = (scopeCommands[key] ?? 0) + 1;
    if (!answer?.ok) {
      violations.push({ rule: "answer", runId: "*", message: `${command.actor} was answered ${answer ? `${answer.code}: ${answer.message}` : "nothing"}` });
      continue;
    }
    const moved = [...(answer.halted ?? []), ...(answer.paused ?? []), ...(answer.cancelling ?? [])];
    haltedRuns += answer.halted?.length ?? 0;
    cancellingAfterUnhalt += answer.cancelling?.length ?? 0;
    for (const runId of moved) {
      const rows = (await checkStore.listCommands(runId)).filter((c) => c.actor === command.actor);
      if (rows.length !== 1 || rows[0].type !== command.action || rows[0].outcome !== "applied") {
        violations.push({ rule: "command-outcome", runId, message: `${command.actor} says it moved the run, its rows: ${JSON.stringify(rows.map((r) => `${r.type}: ${r.outcome}`))}` });
      }
    }
  }
  checkLedger.close();
  ledger.close();
  const keep = violations.length > 0 && options.keepOnViolations !== false;
  if (pg && !keep) await pg.cleanup();
  else for (const opened of openedStores) await opened.close();
  if (keep) kept = pg ? `${pg.url} schema ${pg.schema}` : options.dir;
  spreads.sort((a, b) => a - b);
  return {
    store: options.store,
    seed: options.seed,
    rounds: options.rounds,
    races,
    scopeCommands,
    haltedRuns,
    cancellingAfterUnhalt,
    runs: runIds.length,
    commands: issued.size,
    answers,
    outcomes,
    spreadMs: { p50: spreads[Math.floor(spreads.length / 2)] ?? 0, max: spreads.at(-1) ?? 0 },
    figures: check.figures,
    violations,
    durationMs: Date.now() - started,
    ...(kept ? { kept } : {}),
  };
}
