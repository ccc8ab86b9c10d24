/**
 * The long crash campaign (`npm run crash`): the same campaign as the CI slice with many more
 * kill points. CRASH_KILLS (default 500), CRASH_CANCEL_KILLS (default 20) and CRASH_SEED
 * (default 1) set its size and seed. Exits 1 on any violation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCampaign, runCancelUnderCrash } from "./campaign.js";
import { cancelViolations, campaignViolations } from "./verdicts.js";

const kills = Number(process.env.CRASH_KILLS ?? 500);
const cancelKills = Number(process.env.CRASH_CANCEL_KILLS ?? 20);
const seed = Number(process.env.CRASH_SEED ?? 1);
const dir = mkdtempSync(join(tmpdir(), "tether-crash-"));
const log = (line: string) => console.log(`[${new Date().toISOString()}] ${line}`);

try {
  log(`campaign: ${kills} kills, seed ${seed}, in ${dir}`);
  const campaign = await runCampaign({ dir, seed, kills, runsPerBatch: 10, steps: [20, 40], killDelayMs: [20, 500], log });
  const campaignProblems = campaignViolations(campaign, { minKills: kills });
  log(
    `campaign: ${campaign.kills} kills over ${campaign.childStarts} child processes, ${campaign.runs.length} runs, in flight at kills ${JSON.stringify(campaign.inFlightAtKill)}, ` +
      `${campaign.uncertainResolutions.length} uncertain resolved, recovery ${JSON.stringify(campaign.recoveryDecisions)}, ${campaign.idempotentRetries} idempotent retries absorbed, ${Math.round(campaign.durationMs / 1000)} s`,
  );
  // A run needs compensations left for each kill, so the drafts grow with the kills: twice as
  // many, as a run often finishes more than one compensation between two kills.
  const cancel = await runCancelUnderCrash({ dir, seed, runs: 3, drafts: Math.max(6, 2 * cancelKills + 2), kills: cancelKills, compensateMs: 120, log });
  const cancelProblems = cancelViolations(cancel, { minKills: cancelKills });
  log(`cancel under crash: ${cancel.kills} kills, ${cancel.runs.map((r) => `${r.runId} ${r.status} (${r.effects.length} effects)`).join(", ")}, ${Math.round(cancel.durationMs / 1000)} s`);
  const problems = [...campaignProblems, ...cancelProblems];
  for (const problem of problems) console.error(`VIOLATION: ${problem}`);
  if (problems.length) process.exitCode = 1;
  else log("no violations");
} finally {
  if (!process.exitCode) rmSync(dir, { recursive: true, force: true });
  else console.error(`kept ${dir} for inspection`);
}
