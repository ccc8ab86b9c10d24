/**
 * The long crash campaign (`npm run crash`): the same campaign as the CI slice with many more
 * kill points. CRASH_KILLS (default 500), CRASH_CANCEL_KILLS (default 20) and CRASH_SEED
 * (default 1) set its size and seed; CRASH_STORES (default `sqlite`; `sqlite,postgres` for both)
 * the stores it runs on, one after the other (PostgreSQL at TETHER_TEST_DATABASE_URL, a schema of
 * the campaign's own, dropped after unless a violation keeps it). Exits 1 on any violation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCampaign, runCancelUnderCrash } from "./campaign.js";
import type { CrashStoreKind } from "./crash-store.js";
import { cancelViolations, campaignViolations } from "./verdicts.js";

const kills = Number(process.env.CRASH_KILLS ?? 500);
const cancelKills = Number(process.env.CRASH_CANCEL_KILLS ?? 20);
const seed = Number(process.env.CRASH_SEED ?? 1);
const stores = (process.env.CRASH_STORES ?? "sqlite").split(",").map((s) => s.trim()) as CrashStoreKind[];
for (const store of stores) if (store !== "sqlite" && store !== "postgres") throw new Error(`CRASH_STORES: unknown store ${JSON.stringify(store)} (sqlite, postgres)`);
const dir = mkdtempSync(join(tmpdir(), "tether-crash-"));
const log = (line: string) => console.log(`[${new Date().toISOString()}] ${line}`);

try {
  const problems: string[] = [];
  for (const store of stores) {
    const storeDir = join(dir, store);
    log(`${store}: campaign: ${kills} kills, seed ${seed}, in ${storeDir}`);
    const campaign = await runCampaign({ dir: storeDir, seed, kills, runsPerBatch: 10, steps: [20, 40], killDelayMs: [20, 500], log, store });
    const campaignProblems = campaignViolations(campaign, { minKills: kills });
    log(
      `${store}: campaign: ${campaign.kills} kills over ${campaign.childStarts} child processes, ${campaign.runs.length} runs, in flight at kills ${JSON.stringify(campaign.inFlightAtKill)}, ` +
        `${campaign.uncertainResolutions.length} uncertain resolved, recovery ${JSON.stringify(campaign.recoveryDecisions)}, ${campaign.idempotentRetries} idempotent retries absorbed, ` +
        `${campaignProblems.length} violations, ${Math.round(campaign.durationMs / 1000)} s`,
    );
    // A run needs compensations left for each kill, so the drafts grow with the kills: twice as
    // many, as a run often finishes more than one compensation between two kills.
    const cancel = await runCancelUnderCrash({ dir: storeDir, seed, runs: 3, drafts: Math.max(6, 2 * cancelKills + 2), kills: cancelKills, compensateMs: 120, log, store });
    const cancelProblems = cancelViolations(cancel, { minKills: cancelKills });
    log(
      `${store}: cancel under crash: ${cancel.kills} kills, ${cancel.runs.map((r) => `${r.runId} ${r.status} (${r.effects.length} effects)`).join(", ")}, ` +
        `${cancelProblems.length} violations, ${Math.round(cancel.durationMs / 1000)} s`,
    );
    problems.push(...[...campaignProblems, ...cancelProblems].map((p) => `${store}: ${p}`));
  }
  for (const problem of problems) console.error(`VIOLATION: ${problem}`);
  if (problems.length) process.exitCode = 1;
  else log("no violations");
} finally {
  if (!process.exitCode) rmSync(dir, { recursive: true, force: true });
  else console.error(`kept ${dir} for inspection`);
}
