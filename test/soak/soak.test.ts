import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTether, SqliteStore } from "../../src/index.js";
import { crashAgent, crashAgentName, crashPrompt, planFor } from "../crash/agents.js";
import { waitUntil } from "../crash/child-process.js";
import { Ledger } from "../crash/ledger.js";
import { runSoak, type SoakReport, type SoakStoreKind } from "./soak-campaign.js";
import { checkSoak, describeViolation } from "./soak-checker.js";

/**
 * The CI slice of the soak (`npm run soak` runs minutes per store): seeded random pause,
 * resume, cancel, say, and halts of one agent's scope, on runs whose tools write to a ledger, then the independent checker
 * reads the store and the ledger afresh. Each store gets its own seconds here.
 */
const dir = mkdtempSync(join(tmpdir(), "tether-soak-ci-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const seconds = 20;

function soakSlice(store: SoakStoreKind, seed: number) {
  let report: SoakReport;
  beforeAll(async () => {
    report = await runSoak({ store, dir: join(dir, store), seconds, seed, keepOnViolations: false });
    console.info(
      `soak on ${store}: ${report.runs} runs, ${Object.values(report.issued).reduce((a, b) => a + b, 0)} commands ${JSON.stringify(report.issued)}, ` +
        `${report.figures.toolCallsChecked} tool calls checked against the ledger, ${report.figures.compensations} compensations, runs ended ${JSON.stringify(report.figures.byStatus)}, ` +
        `violations ${report.violations.length}${report.violations.length ? `: ${report.violations.slice(0, 5).map(describeViolation).join("; ")}` : ""}`,
    );
  }, (seconds + 150) * 1_000);

  it("did what it claims: many runs under every kind of command, pauses and cancels applied, effects compensated", () => {
    expect(report.runs).toBeGreaterThanOrEqual(40);
    for (const action of ["pause", "pause-boundary", "resume", "cancel", "say", "halt", "unhalt"]) expect(report.issued[action] ?? 0).toBeGreaterThan(0);
    expect(report.figures.commandOutcomes["halt: applied"] ?? 0).toBeGreaterThan(0);
    expect(report.figures.commandOutcomes["unhalt: applied"] ?? 0).toBeGreaterThan(0);
    expect(report.figures.commandOutcomes["pause: applied"] ?? 0).toBeGreaterThan(10);
    expect(report.figures.commandOutcomes["resume: applied"] ?? 0).toBeGreaterThan(10);
    expect(report.figures.byStatus.cancelled ?? 0).toBeGreaterThan(0);
    expect(report.figures.compensations).toBeGreaterThan(0);
    expect(report.figures.messagesDelivered).toBeGreaterThan(0);
  });

  it("the checker finds no violation: nothing stuck, legal status history, no call started while not running, each completed effect once in the ledger, every compensation once, each command one outcome", () => {
    expect(report.violations.map(describeViolation)).toEqual([]);
    expect(report.figures.byStatus).toEqual({ completed: expect.any(Number), cancelled: expect.any(Number) });
  });
}

describe("soak on SQLite", () => {
  soakSlice("sqlite", 11);
});

describe("soak on PostgreSQL", () => {
  soakSlice("postgres", 12);
});

describe("the soak checker", () => {
  it("finds a double execution, a stuck status and a compensation run twice that are planted after a clean run", async () => {
    const here = join(dir, "checker");
    const ledger = new Ledger(join(here + "-ledger.db"));
    const store = new SqliteStore({ path: join(here, "tether.db") });
    const runtime = createTether({ agents: [crashAgent(ledger, { tokensPerSecond: 200, compensateMs: 5 })], store, workerPollMs: 20 });
    runtime.startWorker();
    // Seeds whose plans call every tool, so each kind of effect is in the ledger.
    const prompts = [crashPrompt("campaign", 1, 8), crashPrompt("campaign", 2, 8)];
    for (const prompt of prompts) expect(new Set(planFor(prompt).map((c) => c.toolName)).size).toBe(3);
    const done = await runtime.start(crashAgentName, prompts[0]);
    const cancelled = await runtime.start(crashAgentName, prompts[1]);
    await waitUntil(() => ledger.drafts().some((d) => d.runId === cancelled.id), "the second run published a draft");
    await runtime.cancel(cancelled.id);
    await runtime.waitFor(cancelled.id, ["cancelled"]);
    await runtime.waitFor(done.id, ["completed"]);
    await runtime.close();

    const clean = await checkSoak(store, ledger, [done.id, cancelled.id]);
    expect(clean.violations.map(describeViolation)).toEqual([]);
    expect(clean.figures.compensations).toBeGreaterThan(0);

    const append = ledger.appends().find((a) => a.runId === done.id);
    expect(append).toBeDefined();
    ledger.append(append!.key, append!.runId, append!.value, append!.result);
    const compensation = ledger.compensations()[0];
    ledger.compensate(compensation.key, compensation.effectKey, compensation.runId, 0);
    const run = await store.getRun(done.id);
    // A tool call journaled as never started while the run was not halted (only a halt may stop a call between its `started` and its start).
    await store.update({
      runId: done.id,
      journal: [
        { type: "call.started", at: run!.updatedAt, callSeq: 999, data: { kind: "tool", name: "record_fact", key: `${done.id}:999` } },
        { type: "call.aborted", at: run!.updatedAt, callSeq: 999, data: { kind: "tool", name: "record_fact", reason: "not_started" } },
      ],
    });
    await store.update({ runId: done.id, set: { status: "pausing" }, journal: [{ type: "status", at: run!.updatedAt, data: { from: "completed", to: "pausing" } }] });
    // An undo (of a call of its own, 998) started again with nothing before it that allows it;
    // then once more after another worker took the run over, which is allowed.
    const at = run!.updatedAt;
    const start = (attempt: number) => ({ type: "compensation.started" as const, at, callSeq: 998, data: { tool: "publish_draft", attempt } });
    const planted = await store.update({
      runId: cancelled.id,
      journal: [start(1), start(2), { type: "recovery", at, data: { previousWorker: "worker_a", worker: "worker_b", status: "cancelling" } }, start(3)],
    });
    if (!planted.ok) throw new Error("the planted entries were not written");
    const [unexplained, takenOver] = [planted.journal[1].seq, planted.journal[3].seq];

    const found = (await checkSoak(store, ledger, [done.id, cancelled.id])).violations.map(describeViolation);
    expect(found).toContainEqual(expect.stringMatching(`\\[ledger\\] ${done.id}: .*append_log ${append!.key} happened 2 times`));
    expect(found).toContainEqual(expect.stringMatching(`\\[ledger\\] ${cancelled.id}: .*compensation ${compensation.key} ran 2 times`));
    expect(found).toContainEqual(expect.stringMatching(`\\[stuck\\] ${done.id}: .*left pausing`));
    expect(found).toContainEqual(expect.stringMatching(`\\[call-lifecycle\\] ${done.id}: .*tool call 999 \\(record_fact\\) ended call.aborted`));
    expect(found).toContainEqual(expect.stringMatching(`\\[status-history\\] ${done.id}: .*completed → pausing is not a legal edge`));
    expect(found).toContainEqual(expect.stringMatching(`\\[compensation\\] ${cancelled.id}: .*compensation ${cancelled.id}:998:compensate started again \\(entry ${unexplained}\\) with no failed attempt, takeover or halt`));
    expect(found.filter((f) => f.includes(`(entry ${takenOver})`))).toEqual([]);
    await store.close();
    ledger.close();
  }, 60_000);
});
