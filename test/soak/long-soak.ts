/**
 * The soak (`npm run soak`): seeded random pause, resume, cancel and say on many runs for
 * SOAK_SECONDS (default 180) per store, on SQLite and on PostgreSQL (SOAK_STORES, default
 * `sqlite,postgres`; PostgreSQL at TETHER_TEST_DATABASE_URL, a fresh schema dropped after),
 * then the independent checker. SOAK_SEED (default 1). Exits 1 on any violation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runSoak, type SoakStoreKind } from "./soak-campaign.js";
import { describeViolation, type SoakViolation } from "./soak-checker.js";

const seconds = Number(process.env.SOAK_SECONDS ?? 180);
const seed = Number(process.env.SOAK_SEED ?? 1);
const stores = (process.env.SOAK_STORES ?? "sqlite,postgres").split(",").map((s) => s.trim()) as SoakStoreKind[];
const log = (line: string) => console.log(`[${new Date().toISOString()}] ${line}`);

let failed = false;
for (const store of stores) {
  const dir = mkdtempSync(join(tmpdir(), `tether-soak-${store}-`));
  log(`soak on ${store}: ${seconds} s, seed ${seed}`);
  const report = await runSoak({ store, dir, seconds, seed, log });
  const commands = Object.values(report.issued).reduce((a, b) => a + b, 0);
  log(
    `soak on ${store}: ${report.runs} runs, ${commands} commands ${JSON.stringify(report.issued)}, answers ${JSON.stringify(report.answers)}, ` +
      `${report.figures.journalEntries} journal entries, ${report.figures.toolCallsChecked} tool calls checked against ${report.figures.ledgerRows} ledger rows, ` +
      `${report.figures.effects} effects, ${report.figures.compensations} compensations, ${report.figures.commands} command rows ${JSON.stringify(report.figures.commandOutcomes)}, ` +
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
