import type { Command } from "commander";
import { StoreCorruptError } from "../../engine/errors.js";
import { verifySqliteStore } from "../../stores/sqlite-verify.js";
import { globalsOf, info, out, type CliIo } from "../cli-context.js";
import { defaultDbPath, storeFromOptions } from "../connection.js";
import { UsageError } from "../exit-codes.js";

/** `tether verify`: reads every row of a SQLite store and reports what is damaged; changes nothing. */
export function verifyCommand(program: Command, io: CliIo): void {
  program
    .command("verify")
    .description(`read every row of the SQLite store (--db, default ${defaultDbPath}) and report damaged rows; exit code 5 if any, nothing is changed`)
    .option("--json", "print JSON")
    .action(async function verify(this: Command) {
      const globals = globalsOf(this);
      const location = storeFromOptions(globals, defaultDbPath)!;
      if (location.kind !== "sqlite") throw new UsageError("tether verify checks a SQLite store (--db <path>); PostgreSQL checks its own pages and rows");
      const report = verifySqliteStore(location.path);
      if (globals.json) out(io, JSON.stringify(report));
      else {
        for (const damage of report.damage) out(io, `${damage.runId ?? "-"}\t${damage.row}\t${damage.problem}`);
        const intact = report.runs - report.damagedRuns.length;
        info(io, `${report.path}: ${report.runs} runs, ${report.rows} journal rows read; ${report.damage.length ? `${report.damage.length} damaged (${report.damagedRuns.length} runs), ${intact} runs intact` : "no damage"}`);
      }
      if (report.damage.length) {
        throw new StoreCorruptError(report.path, `${report.damage.length} damaged rows in ${report.damagedRuns.length} runs${report.damagedRuns.length ? ` (${report.damagedRuns.join(", ")})` : ""}`, {
          damagedRuns: report.damagedRuns,
        });
      }
    });
}
