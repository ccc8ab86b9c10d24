import type { Command } from "commander";
import type { Json } from "../../engine/json.js";
import type { DamagedRun } from "../../engine/store.js";
import { attach, followLogs } from "../attach.js";
import { addBudgetOptions, budgetsFrom, info, integer, jsonArgument, out, parseStatusList, withConnection, type BudgetFlags, type CliIo } from "../cli-context.js";
import { throwIfDamaged } from "../damaged-runs.js";
import { UsageError } from "../exit-codes.js";
import { runsTable, showRun, table } from "../format.js";
import { LogPrinter } from "../log-printer.js";
import { waitingRuns, waitingTable } from "../waiting-list.js";

/** Reading runs, and starting them: start, ls, show, logs, attach, agents. */
export function runCommands(program: Command, io: CliIo): void {
  addBudgetOptions(
    program
      .command("start <agent> [prompt...]")
      .description("start a run of an agent; prints its id")
      .option("--input <json>", "the run's input as JSON (instead of a prompt)", jsonArgument("--input"))
      .option("--model <model>", "override the agent's model (e.g. simulated:sim-1?tps=80)")
      .option("-f, --follow", "follow its log until it ends")
      .option("--attach", "attach to it (keys: p pause, r resume, c cancel, q detach)"),
  ).action(async function start(this: Command, agent: string, prompt: string[], flags: BudgetFlags & { input?: unknown; model?: string; follow?: boolean; attach?: boolean }) {
    const input = flags.input !== undefined ? (flags.input as Json) : prompt.join(" ");
    if (input === "") throw new UsageError('give a prompt (tether start <agent> "what to do") or --input <json>');
    await withConnection(this, { agents: true, create: true }, async ({ client, target, direct }, globals) => {
      const run = await client.start(agent, input, { budgets: budgetsFrom(flags), model: flags.model });
      if (globals.json) out(io, JSON.stringify(run));
      else {
        out(io, run.id);
        info(io, `started ${run.id} (${run.agent}); follow it: tether logs ${run.id} -f · control it: tether attach ${run.id}`);
        // Straight on a store this command only queues the run: say who executes it, or -f would wait in silence.
        if (direct) info(io, `it is queued in ${target}: a \`tether serve\` or \`tether worker\` on that store executes it (this command executes nothing)`);
      }
      if (flags.attach) await attach(client, run.id, { input: io.stdin, output: io.stdout });
      else if (flags.follow) await followLogs(client, run.id, (t) => io.stdout.write(t));
    });
  });

  program
    .command("ls")
    .description("list runs, newest first; with --waiting, the runs waiting for a person, oldest wait first")
    .option("--status <statuses>", "only these statuses, comma-separated (e.g. running,paused)")
    .option("--waiting", "only runs waiting for a person (an approval, an uncertain effect, a budget or guard, a stale snapshot, a halt), with why and for how long")
    .option("--agent <name>", "only runs of this agent")
    .option("--limit <n>", "at most this many", integer("--limit", 1), 50)
    .option("--json", "print JSON")
    .action(async function ls(this: Command, flags: { status?: string; agent?: string; limit: number; waiting?: boolean }) {
      if (flags.waiting && flags.status) throw new UsageError("--waiting lists paused and halted runs by why they wait; leave out --status");
      await withConnection(this, {}, async ({ client }, globals) => {
        const damaged: DamagedRun[] = [];
        if (flags.waiting) {
          const rows = await waitingRuns(client, { agent: flags.agent, limit: flags.limit }, damaged);
          out(io, globals.json ? JSON.stringify(rows.map(({ run, wait, since }) => ({ ...run, waiting: { ...wait, since } }))) : waitingTable(rows, Date.now()));
        } else {
          const runs = await client.list({ status: flags.status ? parseStatusList(flags.status) : undefined, agent: flags.agent, limit: flags.limit }, damaged);
          out(io, globals.json ? JSON.stringify(runs) : runsTable(runs, Date.now()));
        }
        throwIfDamaged(io, damaged);
      });
    });

  program
    .command("show <run>")
    .description("show a run: status, usage, what it waits on, what a cancel would undo")
    .option("--json", "print JSON")
    .action(async function show(this: Command, runId: string) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const [run, storage] = await Promise.all([client.get(runId), client.storage(runId)]);
        out(io, globals.json ? JSON.stringify({ ...run, storage }) : showRun(run, Date.now(), storage));
      });
    });

  program
    .command("logs <run>")
    .description("print a run's journal; with -f, follow it live (model text as it streams, each call as it starts and ends)")
    .option("-f, --follow", "keep following until the run ends")
    .option("--after <seq>", "start after this journal entry", integer("--after"))
    .option("--no-text", "leave out model text")
    .option("--json", "print one JSON object per line (journal entries; with -f, live text too)")
    .action(async function logs(this: Command, runId: string, flags: { follow?: boolean; after?: number; text: boolean }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        if (flags.follow) {
          if (globals.json) {
            const stop = new AbortController();
            for await (const event of client.events(runId, { after: flags.after, signal: stop.signal })) {
              out(io, JSON.stringify(event.type === "journal" ? { event: "journal", ...event.entry } : { event: "delta", id: event.id, callSeq: event.callSeq, text: event.text }));
              if (event.type === "journal" && event.entry.type === "status" && ["completed", "failed", "cancelled"].includes(String(event.entry.data.to))) stop.abort();
            }
            return;
          }
          await followLogs(client, runId, (t) => io.stdout.write(t), { after: flags.after, text: flags.text });
          return;
        }
        const entries = await client.journalAll(runId, { after: flags.after });
        if (globals.json) {
          for (const entry of entries) out(io, JSON.stringify(entry));
          return;
        }
        const printer = new LogPrinter(client, runId, (t) => io.stdout.write(t), { text: flags.text });
        for (const entry of entries) await printer.print({ type: "journal", id: String(entry.seq), seq: entry.seq, entry });
        if (entries.length === 0) info(io, "no journal entries");
      });
    });

  program
    .command("attach <run>")
    .description("follow a run live with keys: p pause, r resume, c cancel (after confirming), q detach; Ctrl-C pauses, twice detaches")
    .action(async function attachCommand(this: Command, runId: string) {
      await withConnection(this, {}, async ({ client }) => {
        await attach(client, runId, { input: io.stdin, output: io.stdout });
      });
    });

  program
    .command("agents")
    .description("list the agents the server can run")
    .option("--json", "print JSON")
    .action(async function agents(this: Command) {
      await withConnection(this, { agents: true }, async ({ client }, globals) => {
        const list = await client.agents();
        if (globals.json) return out(io, JSON.stringify(list));
        out(
          io,
          table(
            ["AGENT", "VERSION", "TOOLS", "DESCRIPTION"],
            list.map((a) => [a.name, a.version, a.tools.map((t) => `${t.name}${t.compensates ? "↺" : ""}`).join(","), a.description ?? ""]),
          ),
        );
      });
    });
}
