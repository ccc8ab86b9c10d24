import type { Command } from "commander";
import { info, out, withConnection, type CliIo } from "../cli-context.js";
import { formatAge, runsTable } from "../format.js";

/** The kill switch: halt, unhalt (admin). */
export function haltCommands(program: Command, io: CliIo): void {
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
          if (globals.json) return out(io, JSON.stringify(halts));
          if (halts.halts.length === 0) out(io, "no halt in force");
          for (const h of halts.halts) out(io, `halt ${h.scope} by ${h.actor}${h.reason ? ` (${h.reason})` : ""}, ${formatAge(h.at, Date.now())}`);
          if (halts.runs.length) out(io, runsTable(halts.runs, Date.now()));
          return;
        }
        const result = await client.halt({ reason: flags.reason, agent: flags.agent });
        if (globals.json) return out(io, JSON.stringify(result));
        out(io, `halted ${result.halted.length} run${result.halted.length === 1 ? "" : "s"} (scope ${result.scope})`);
        info(io, `no new run of ${result.scope === "*" ? "any agent" : result.scope.slice("agent:".length)} starts until \`tether unhalt${flags.agent ? ` --agent ${flags.agent}` : ""}\``);
      });
    });

  program
    .command("unhalt")
    .description("lift a halt (admin): halted runs become paused, for their owners to resume or cancel")
    .option("--agent <name>", "lift the halt of this agent")
    .option("--reason <text>", "why (journaled with your name)")
    .option("--json", "print JSON")
    .action(async function unhalt(this: Command, flags: { agent?: string; reason?: string }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const result = await client.unhalt({ agent: flags.agent, reason: flags.reason });
        if (globals.json) return out(io, JSON.stringify(result));
        out(io, `lifted halt ${result.scope}: ${result.paused.length} run${result.paused.length === 1 ? "" : "s"} now paused`);
        for (const id of result.paused) info(io, `  tether resume ${id}`);
      });
    });
}
