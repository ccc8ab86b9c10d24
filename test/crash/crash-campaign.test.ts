import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { crashFunctionAgentName, crashParallelLoopAgentName } from "./agents.js";
import { runCampaign, runCancelUnderCrash } from "./campaign.js";
import { campaignViolations, cancelViolations } from "./verdicts.js";

/**
 * The CI slice of the crash campaign: a worker process is SIGKILLed at seeded random moments
 * while it executes runs whose tools write to an external ledger; new processes recover the
 * runs. `npm run crash` runs the same campaign with hundreds of kill points.
 */
const dir = mkdtempSync(join(tmpdir(), "tether-crash-ci-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("crash campaign (SIGKILL of the worker process)", () => {
  it("recovers every run after 50+ kills: no call completed twice, idempotent keys applied once, in-flight non-idempotent effects uncertain, outputs as uninterrupted", async () => {
    const report = await runCampaign({ dir: join(dir, "campaign"), seed: 7, kills: 50, runsPerBatch: 10, steps: [16, 28], killDelayMs: [20, 400] });

    expect(report.kills).toBeGreaterThanOrEqual(50);
    expect(report.runs.length).toBeGreaterThanOrEqual(10);
    expect(report.runs.every((r) => r.status === "completed")).toBe(true);
    expect(report.runs.map((r) => r.output)).toEqual(report.runs.map((r) => r.expectedOutput));
    expect(report.inFlightAtKill.append_log ?? 0).toBeGreaterThan(0);
    // The `check` path under a real SIGKILL: kills landed inside publish_draft (which declares
    // `check`), and recovery took both of its branches: the draft was found (applied without a
    // second call) and not found (issued again); the ledger check above counts each draft once.
    expect(report.inFlightAtKill.publish_draft ?? 0).toBeGreaterThan(0);
    expect(report.recoveryDecisions["publish_draft:apply"] ?? 0).toBeGreaterThan(0);
    expect(report.recoveryDecisions["publish_draft:retry"] ?? 0).toBeGreaterThan(0);
    expect(report.recoveryDecisions["publish_draft:uncertain"] ?? 0).toBe(0);
    expect(report.uncertainResolutions.every((r) => r.tool === "append_log" && r.reason === "uncertain_effect")).toBe(true);
    expect(report.violations).toEqual([]);
    expect(campaignViolations(report, { minKills: 50 })).toEqual([]);
    console.info(
      `crash campaign: ${report.kills} kills, ${report.childStarts} child processes, ${report.runs.length} runs; in flight at kills ${JSON.stringify(report.inFlightAtKill)}; ` +
        `${report.uncertainResolutions.length} uncertain effects resolved; recovery decisions ${JSON.stringify(report.recoveryDecisions)}; ${(report.durationMs / 1000).toFixed(1)} s`,
    );
  }, 170_000);

  it("async-function agents with three calls in flight at once: after 15+ kills no call completed twice, idempotent keys applied once, in-flight non-idempotent effects uncertain, outputs as uninterrupted", async () => {
    const report = await runCampaign({ dir: join(dir, "function"), seed: 11, kills: 15, runsPerBatch: 6, steps: [12, 21], killDelayMs: [20, 400], agent: crashFunctionAgentName });

    expect(report.runs.every((r) => r.status === "completed")).toBe(true);
    expect(report.runs.map((r) => r.output)).toEqual(report.runs.map((r) => r.expectedOutput));
    expect(report.violations).toEqual([]);
    expect(campaignViolations(report, { minKills: 15 })).toEqual([]);
    // Parallel calls were in flight together at kills: more calls in flight than kills.
    const inFlight = Object.values(report.inFlightAtKill).reduce((a, b) => a + b, 0);
    expect(inFlight).toBeGreaterThan(report.kills);
    console.info(
      `crash campaign (async-function agents, parallel calls): ${report.kills} kills, ${report.runs.length} runs; in flight at kills ${JSON.stringify(report.inFlightAtKill)}; ` +
        `${report.uncertainResolutions.length} uncertain effects resolved; recovery decisions ${JSON.stringify(report.recoveryDecisions)}; ${(report.durationMs / 1000).toFixed(1)} s`,
    );
  }, 170_000);

  it("the tool loop with three tool calls a turn run at once: after 15+ kills no call completed twice, idempotent keys applied once, in-flight non-idempotent effects uncertain, outputs as uninterrupted", async () => {
    const report = await runCampaign({ dir: join(dir, "parallel-loop"), seed: 13, kills: 15, runsPerBatch: 6, steps: [12, 21], killDelayMs: [20, 400], agent: crashParallelLoopAgentName });

    expect(report.runs.every((r) => r.status === "completed")).toBe(true);
    expect(report.runs.map((r) => r.output)).toEqual(report.runs.map((r) => r.expectedOutput));
    expect(report.violations).toEqual([]);
    expect(campaignViolations(report, { minKills: 15 })).toEqual([]);
    // Tool calls of one turn were in flight together at kills: more of them than kills.
    const toolsInFlight = Object.entries(report.inFlightAtKill).reduce((sum, [name, n]) => (name.startsWith("simulated") ? sum : sum + n), 0);
    expect(toolsInFlight).toBeGreaterThan(report.kills);
    console.info(
      `crash campaign (tool loop, parallel tool calls): ${report.kills} kills, ${report.runs.length} runs; in flight at kills ${JSON.stringify(report.inFlightAtKill)}; ` +
        `${report.uncertainResolutions.length} uncertain effects resolved; recovery decisions ${JSON.stringify(report.recoveryDecisions)}; ${(report.durationMs / 1000).toFixed(1)} s`,
    );
  }, 170_000);

  it("a cancel killed during compensation continues after recovery: every effect compensated once, newest first, the run cancelled", async () => {
    const report = await runCancelUnderCrash({ dir: join(dir, "cancel"), seed: 3, runs: 3, drafts: 10, kills: 4, compensateMs: 120 });

    expect(report.kills).toBe(4);
    expect(report.statusAtKills).toContain("cancelling");
    for (const run of report.runs) {
      const newestFirst = run.effects.map((e) => e.callSeq).sort((a, b) => b - a);
      expect(run.status).toBe("cancelled");
      expect(run.effects.length).toBe(10);
      expect(run.effects.every((e) => e.state === "compensated")).toBe(true);
      expect(run.compensationOrder).toEqual(newestFirst);
      expect(Object.values(run.succeededPerEffect)).toEqual(newestFirst.map(() => 1));
      expect(Object.values(run.ledgerCompensations)).toEqual(run.draftKeys.map(() => 1));
      expect(run.report?.compensated.map((c) => c.callSeq)).toEqual(newestFirst);
    }
    // Kills landed inside compensations: they were attempted again, and where the first attempt had
    // already reached the ledger, the compensation key deduped the second.
    const reattempted = report.runs.flatMap((r) => r.effects).filter((e) => e.attempts > 1).length;
    const deduped = report.runs.flatMap((r) => Object.values(r.ledgerAttempts)).filter((n) => n > 1).length;
    expect(reattempted).toBeGreaterThan(0);
    expect(deduped).toBeGreaterThan(0);
    expect(cancelViolations(report, { minKills: 4 })).toEqual([]);
    console.info(`cancel under crash: ${report.kills} kills, ${reattempted} compensations attempted again after a kill, ${deduped} of them deduped by the ledger; ${(report.durationMs / 1000).toFixed(1)} s`);
  }, 60_000);
});
