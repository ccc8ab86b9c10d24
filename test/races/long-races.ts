/**
 * The control races (`npm run races`): three controller processes fire conflicting pause,
 * resume and cancel commands at the same runs at the same moment, with halts and unhalts of one
 * agent's scope among them, RACES_ROUNDS rounds (default 500) per store, on SQLite (one worker process) and PostgreSQL (two; RACES_STORES, default
 * `sqlite,postgres`). RACES_SEED (default 1). Exits 1 on any violation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeViolation, type SoakViolation } from "../soak/soak-checker.js";
import { runRaces, type RacesStoreKind } from "./races-campaign.js";

const rounds = Number(process.env.RACES_ROUNDS ?? 500);
const seed = Number(process.env.RACES_SEED ?? 1);
const stores = (process.env.RACES_STORES ?? "sqlite,postgres").split(",").map((s) => s.trim()) as RacesStoreKind[];
const log = (line: string) => console.log(`[${new Date().toISOString()}] ${line}`);

let failed = false;
for (const store of stores) {
  const dir = mkdtempSync(join(tmpdir(), `tether-races-${store}-`));
  log(`races on ${store}: ${rounds} rounds, seed ${seed}`);
  const report = await runRaces({ store, dir, seed, rounds, log });
  log(
    `races on ${store}: ${report.races} races over ${report.rounds} rounds on ${report.runs} runs, ${report.commands} commands, ` +
      `halts and unhalts ${JSON.stringify(report.scopeCommands)} (${report.haltedRuns} runs halted, ${report.cancellingAfterUnhalt} back to cancelling), answers ${JSON.stringify(report.answers)}, ` +
      `outcomes ${JSON.stringify(report.outcomes)}, spread within a race p50 ${report.spreadMs.p50} ms / max ${report.spreadMs.max} ms, ` +
      `runs ended ${JSON.stringify(report.figures.byStatus)}, ${Math.round(report.durationMs / 1000)} s, violations: ${report.violations.length}`,
  );
  const byRule = new Map<string, SoakViolation[]>();
  for (const violation of report.violations) byRule.set(violation.rule, [...(byRule.get(violation.rule) ?? []), violation]);
  for (const [rule, found] of byRule) {
    console.error(`${found.length} violations of ${rule}, the first:`);
    for (const violation of found.slice(0, 10)) console.error(`VIOLATION: ${describeViolation(violation)}`);
  }
  if (report.violations.length) {
    failed = true;
    console.error(`kept ${report.kept ?? dir} for inspection`);
  } else rmSync(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
