import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCampaign, runCancelUnderCrash } from "./campaign.js";
import { campaignViolations, cancelViolations } from "./verdicts.js";

/**
 * The CI slice of the crash campaign on PostgreSQL: the same seeded SIGKILLs of worker processes
 * and the same checker as on SQLite (`crash-campaign.test.ts`), the runs kept in a schema of the
 * campaign's own. Tool calls last 60 ms here and each kill waits for a call in flight, so that
 * 15 kills land inside calls even on a loaded machine (PostgreSQL's slower writes leave calls a
 * smaller share of a step, and a loaded machine starts a child slowly). `CRASH_STORES=postgres npm run crash`
 * runs hundreds of kill points.
 */
const dir = mkdtempSync(join(tmpdir(), "tether-crash-pg-ci-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("crash campaign on PostgreSQL (SIGKILL of the worker process)", () => {
  it("recovers every run after 15+ kills: no call completed twice, idempotent keys applied once, in-flight non-idempotent effects uncertain, outputs as uninterrupted", async () => {
    const report = await runCampaign({ dir: join(dir, "campaign"), seed: 17, kills: 15, runsPerBatch: 10, steps: [12, 24], killDelayMs: [20, 400], timings: { toolMs: 60 }, killInFlight: true, store: "postgres" });

    expect(report.kills).toBeGreaterThanOrEqual(15);
    expect(report.runs.every((r) => r.status === "completed")).toBe(true);
    expect(report.runs.map((r) => r.output)).toEqual(report.runs.map((r) => r.expectedOutput));
    expect(Object.values(report.inFlightAtKill).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(report.uncertainResolutions.every((r) => r.tool === "append_log" && r.reason === "uncertain_effect")).toBe(true);
    expect(report.violations).toEqual([]);
    expect(campaignViolations(report, { minKills: 15 })).toEqual([]);
    console.info(
      `crash campaign (PostgreSQL): ${report.kills} kills, ${report.childStarts} child processes, ${report.runs.length} runs; in flight at kills ${JSON.stringify(report.inFlightAtKill)}; ` +
        `${report.uncertainResolutions.length} uncertain effects resolved; recovery decisions ${JSON.stringify(report.recoveryDecisions)}; ${(report.durationMs / 1000).toFixed(1)} s`,
    );
  }, 170_000);

  it("a cancel killed during compensation continues after recovery: every effect compensated once, newest first, the run cancelled", async () => {
    const report = await runCancelUnderCrash({ dir: join(dir, "cancel"), seed: 5, runs: 2, drafts: 8, kills: 3, compensateMs: 120, store: "postgres" });

    expect(report.kills).toBe(3);
    expect(report.statusAtKills).toContain("cancelling");
    for (const run of report.runs) {
      const newestFirst = run.effects.map((e) => e.callSeq).sort((a, b) => b - a);
      expect(run.status).toBe("cancelled");
      expect(run.effects.length).toBe(8);
      expect(run.effects.every((e) => e.state === "compensated")).toBe(true);
      expect(run.compensationOrder).toEqual(newestFirst);
      expect(Object.values(run.ledgerCompensations)).toEqual(run.draftKeys.map(() => 1));
    }
    expect(cancelViolations(report, { minKills: 3 })).toEqual([]);
  }, 90_000);
});
