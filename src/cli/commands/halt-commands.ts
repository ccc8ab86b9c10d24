import type { Command } from "commander";
import { info, integer, out, withConnection, type CliIo } from "../cli-context.js";
import { throwIfDamaged } from "../damaged-runs.js";
import { TetherError, type ErrorCode } from "../../engine/errors.js";
import type { RunFailure } from "../../engine/halt-command.js";
import { formatAge, formatBytes, parseDuration, runsTable } from "../format.js";

/**
 * Runs a halt or an unhalt could not change fail the command (the exit code of the first one's
 * error: 5 for a damaged record) once the rest is done and printed.
 */
function throwIfFailed(failed: readonly RunFailure[], what: string, rest: string): void {
  if (failed.length === 0) return;
  const named = failed.map((f) => `${f.runId} (${f.code})`).join(", ");
  throw new TetherError(failed[0].code as ErrorCode, `${failed.length} run${failed.length === 1 ? "" : "s"} could not be ${what}: ${named}; ${rest}`);
}

/** The kill switch: halt, unhalt (admin); and retention: prune. */
export function haltCommands(program: Command, io: CliIo): void {
  program
    .command("prune")
    .description("delete finished runs (completed, failed, cancelled) last updated before a bound, with their journals (admin); never a run that is not finished")
    .requiredOption("--completed-before <age>", "how old a finished run must be: 30d, 12h, 45m, 90s")
    .option("--dry-run", "count what would be removed, remove nothing")
    .option("--batch <n>", "runs deleted per transaction (running work goes on between batches)", integer("--batch", 1))
    .option("--json", "print JSON")
    .action(async function prune(this: Command, flags: { completedBefore: string; dryRun?: boolean; batch?: number }) {
      const olderThanMs = parseDuration(flags.completedBefore);
      if (olderThanMs === undefined) throw new TetherError("invalid_input", `--completed-before ${JSON.stringify(flags.completedBefore)} is not an age: use a number and a unit, as in 30d, 12h, 45m or 90s (a number alone is refused: days or milliseconds?)`);
      // JavaScript dates reach back to 271,821 BC: an age past this year's distance from there is no date.
      if (olderThanMs > Date.now() + 8.64e15) throw new TetherError("invalid_input", `--completed-before ${flags.completedBefore} reaches back before any date; every finished run is newer than that`);
      await withConnection(this, {}, async ({ client, target }, globals) => {
        const result = await client.prune({ olderThanMs, dryRun: flags.dryRun, ...(flags.batch ? { batchSize: flags.batch } : {}) });
        if (globals.json) return out(io, JSON.stringify(result));
        const what = `${result.runs} finished run${result.runs === 1 ? "" : "s"} last updated before ${new Date(result.before).toISOString()}: ${result.journalEntries} journal entries, ${result.messages} messages, ${formatBytes(result.bytes)}`;
        out(io, result.dryRun ? `would remove ${what}` : `removed ${what} (${result.batches} batch${result.batches === 1 ? "" : "es"}) from ${target}`);
      });
    });

  program
    .command("halt")
    .description("emergency stop (admin): halt every run, or one agent's; in-flight calls are aborted, nothing is compensated, no new run starts")
    .option("--reason <text>", "why (journaled with your name)", "emergency stop from the tether CLI")
    .option("--agent <name>", "only this agent's runs")
    .option("--list", "show the halts in force and the halted runs instead")
    .option("--json", "print JSON")
    .action(async function halt(this: Command, flags: { reason: string; agent?: string; list?: boolean }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        if (flags.list) {
          const halts = await client.halts();
          if (globals.json) out(io, JSON.stringify(halts));
          else {
            if (halts.halts.length === 0) out(io, "no halt in force");
            for (const h of halts.halts) out(io, `halt ${h.scope} by ${h.actor}${h.reason ? ` (${h.reason})` : ""}, ${formatAge(h.at, Date.now())}`);
            if (halts.runs.length) out(io, runsTable(halts.runs, Date.now()));
          }
          return throwIfDamaged(io, halts.damaged ?? []);
        }
        const result = await client.halt({ reason: flags.reason, agent: flags.agent });
        if (globals.json) out(io, JSON.stringify(result));
        else {
          out(io, `halted ${result.halted.length} run${result.halted.length === 1 ? "" : "s"} (scope ${result.scope})`);
          for (const failure of result.failed) out(io, `not halted: ${failure.runId}\t${failure.code}\t${failure.message}`);
          info(io, `no new run of ${result.scope === "*" ? "any agent" : result.scope.slice("agent:".length)} starts until \`tether unhalt${flags.agent ? ` --agent ${flags.agent}` : ""}\``);
        }
        throwIfFailed(result.failed, "halted", "every other run in scope is halted, and the halt is in force");
      });
    });

  program
    .command("unhalt")
    .description("lift a halt (admin): halted runs become paused, for their owners to resume or cancel; a run halted while cancelling goes on cancelling")
    .option("--agent <name>", "lift the halt of this agent")
    .option("--reason <text>", "why (journaled with your name)")
    .option("--json", "print JSON")
    .action(async function unhalt(this: Command, flags: { agent?: string; reason?: string }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const result = await client.unhalt({ agent: flags.agent, reason: flags.reason });
        if (globals.json) out(io, JSON.stringify(result));
        else {
          out(io, `lifted halt ${result.scope}: ${result.paused.length} run${result.paused.length === 1 ? "" : "s"} now paused`);
          for (const id of result.paused) info(io, `  tether resume ${id}`);
          if (result.cancelling.length) out(io, `${result.cancelling.length} run${result.cancelling.length === 1 ? "" : "s"} halted while cancelling now cancelling again: ${result.cancelling.join(", ")}`);
          for (const failure of result.failed) out(io, `still halted: ${failure.runId}\t${failure.code}\t${failure.message}`);
        }
        throwIfFailed(result.failed, "taken out of the halt", "the halt is lifted, and every other run in scope is out of it");
      });
    });
}
