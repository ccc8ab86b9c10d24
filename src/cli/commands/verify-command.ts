import type { Command } from "commander";
import { StoreCorruptError } from "../../engine/errors.js";
import { requireInstalled } from "../../engine/optional-import.js";
import { describeLocation, type StoreLocation } from "../../stores/open-store.js";
import { verifySqliteStore } from "../../stores/sqlite-verify.js";
import type { VerifyReport } from "../../stores/verify-report.js";
import { globalsOf, info, out, type CliIo } from "../cli-context.js";
import { defaultDbPath, requireExistingStore, storeFromOptions } from "../connection.js";

/** `tether verify`: reads every row of a store, SQLite or PostgreSQL, and reports what is damaged; changes nothing. */
export function verifyCommand(program: Command, io: CliIo): void {
  program
    .command("verify")
    .description(
      `read every row of the store (--db, default ${defaultDbPath}, or --database-url) and report damaged rows; exit code 5 if any, nothing is changed`,
    )
    .option("--json", "print JSON")
    .action(async function verify(this: Command) {
      const globals = globalsOf(this);
      const location = storeFromOptions(globals, defaultDbPath)!;
      requireExistingStore(location);
      const report = await verifyAt(location);
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

/** `pg` is an optional dependency: loaded only to verify a PostgreSQL store. */
async function verifyAt(location: StoreLocation): Promise<VerifyReport> {
  if (location.kind === "sqlite") return verifySqliteStore(location.path);
  requireInstalled("pg", "the PostgreSQL store");
  const { verifyPostgresStore } = await import("../../stores/pg-verify.js");
  return verifyPostgresStore({ connectionString: location.url, schema: location.schema, path: describeLocation(location) });
}
