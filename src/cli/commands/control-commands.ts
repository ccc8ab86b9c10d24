import type { Command } from "commander";
import type { Json } from "../../engine/json.js";
import type { ResumeBody, RunView } from "../../server/api-types.js";
import { previewChanged, previewLines } from "../attach.js";
import { addBudgetOptions, budgetsFrom, info, integer, jsonArgument, out, waitForStatus, withConnection, type BudgetFlags, type CliIo } from "../cli-context.js";
import { confirm } from "../confirm.js";
import { UsageError } from "../exit-codes.js";
import { describeEntry, formatDuration, nextSteps } from "../format.js";

/** How long `pause` and `cancel` wait for the run to stop, by default (`--timeout`). */
const waitTimeoutS = 120;

function summary(run: RunView): string {
  const next = nextSteps(run);
  return `${run.id} is ${run.status}${run.statusReason ? ` (${run.statusReason})` : ""} at step ${run.step}${next ? `; next: ${next}` : ""}`;
}

/** pause, resume, cancel, say, approve, reject, fork. */
export function controlCommands(program: Command, io: CliIo): void {
  program
    .command("pause <run>")
    .description("pause a run: no new call starts once the command is recorded; waits until it is paused")
    .option("--reason <text>", "why (journaled with your name)")
    .option("--boundary", "let an in-flight model call finish instead of aborting it")
    .option("--no-wait", "return once the command is recorded")
    .option("--timeout <seconds>", "how long to wait before giving up (wait_timeout; the command still applies)", integer("--timeout", 1), waitTimeoutS)
    .option("--json", "print the run as JSON")
    .action(async function pause(this: Command, runId: string, flags: { reason?: string; boundary?: boolean; wait: boolean; timeout: number }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        let run = await client.pause(runId, { reason: flags.reason, mode: flags.boundary ? "boundary" : undefined });
        if (flags.wait && run.status === "pausing") {
          // A model call is aborted at once; only a tool that cannot be interrupted makes a pause wait.
          const waiting = run.waitingFor ?? (run.inflight?.kind === "tool" ? run.inflight : null);
          if (!globals.json && waiting) info(io, `pausing: waiting on ${waiting.kind} ${waiting.name}${run.waitingForMs !== null ? ` (${formatDuration(run.waitingForMs)} so far)` : ""}…`);
          run = await waitForStatus(client, run, ["paused", "halted"], {
            timeoutMs: flags.timeout * 1000,
            onWorkerWait: (text) => !globals.json && info(io, `pausing: ${text}`),
            onEntry: (entry) => {
              if (!globals.json && (entry.type === "call.aborted" || entry.type === "call.completed" || entry.type === "resource.released")) info(io, `  ${describeEntry(entry)}`);
            },
          });
        }
        out(io, globals.json ? JSON.stringify(run) : summary(run));
      });
    });

  addBudgetOptions(
    program
      .command("resume <run>")
      .description("resume a paused run from its latest snapshot (in whichever process executes runs)")
      .option("--message <text>", "add a message for the agent first")
      .option("--patch <json>", 'patch the state first: a JSON merge patch like {"vars":{"topic":"x"}}', jsonArgument("--patch"))
      .option("--force", "resume even if the snapshot is stale")
      .option("--resolve <decision>", "decide an uncertain effect: retry, skip, or done")
      .option("--result <json>", "with --resolve done: the result the effect had", jsonArgument("--result"))
      .option("--no-result", "with --resolve done: the effect happened but has no result to give the agent")
      .option("--reason <text>", "why (journaled with your name)")
      .option("--json", "print the run as JSON"),
  ).action(async function resume(this: Command, runId: string, flags: BudgetFlags & { message?: string; patch?: unknown; force?: boolean; resolve?: string; result?: unknown; reason?: string }) {
    // commander's --no-result sets result to false; a JSON --result is parsed by jsonArgument.
    const noResult = flags.result === false && !process.argv.some((a) => a.startsWith("--result"));
    if (noResult) flags.result = undefined;
    if (flags.resolve !== undefined && !["retry", "skip", "done"].includes(flags.resolve)) throw new UsageError(`--resolve must be retry, skip or done (got "${flags.resolve}")`);
    if ((flags.result !== undefined || noResult) && flags.resolve !== "done") throw new UsageError("--result and --no-result go with --resolve done");
    if (flags.resolve === "done" && flags.result === undefined && !noResult) throw new UsageError("--resolve done needs the result the effect had (--result <json>), or --no-result if it has none");
    const body: ResumeBody = {
      reason: flags.reason,
      message: flags.message,
      patch: flags.patch,
      force: flags.force,
      budgets: budgetsFrom(flags),
      resolve: flags.resolve ? { action: flags.resolve as "retry" | "skip" | "done", ...(flags.result !== undefined ? { result: flags.result as Json } : {}), ...(noResult ? { noResult: true } : {}) } : undefined,
    };
    await withConnection(this, { agents: true }, async ({ client }, globals) => {
      const run = await client.resume(runId, body);
      out(io, globals.json ? JSON.stringify(run) : summary(run));
    });
  });

  program
    .command("cancel <run>")
    .description("cancel a run: stop its calls, then undo its effects newest first (shows what will be undone first)")
    .option("--reason <text>", "why (journaled with your name)")
    .option("--inherited <choice>", "when live forks inherited effects a cancel would undo: compensate (undo them anyway) or keep (leave them for the forks)")
    .option("-y, --yes", "do not ask for confirmation (needed when stdin is not a terminal)")
    .option("--no-wait", "return once the command is recorded")
    .option("--timeout <seconds>", "how long to wait before giving up (wait_timeout; the command still applies)", integer("--timeout", 1), waitTimeoutS)
    .option("--json", "print the run as JSON")
    .action(async function cancel(this: Command, runId: string, flags: { reason?: string; inherited?: string; yes?: boolean; wait: boolean; timeout: number }) {
      const inherited = flags.inherited;
      if (inherited !== undefined && inherited !== "compensate" && inherited !== "keep") throw new UsageError(`--inherited takes compensate or keep, not ${inherited}`);
      await withConnection(this, {}, async ({ client }, globals) => {
        let preview = await client.cancelPreview(runId);
        for (;;) {
          // An ended run, or live forks that inherited effects and no choice: let the server give
          // (and journal) its refusal before anything is offered.
          if (preview.cancellable === false || (preview.inherited.length > 0 && inherited === undefined)) {
            if (!globals.json && preview.cancellable) info(io, previewLines(runId, preview).join("\n"));
            await client.cancel(runId, { reason: flags.reason });
            return;
          }
          if (!globals.json) info(io, previewLines(runId, preview, inherited).join("\n"));
          if (flags.yes) break;
          if (!io.stdin.isTTY) throw new UsageError("refusing to cancel without confirmation: stdin is not a terminal; pass --yes");
          if (!(await confirm(`Cancel ${runId}?`))) {
            info(io, "not cancelled");
            return;
          }
          // The run kept working while the question was open: what is done is what was agreed to.
          const now = await client.cancelPreview(runId);
          if (!previewChanged(preview, now)) break;
          info(io, "What a cancel would do changed while you decided:");
          preview = now;
        }
        let run = await client.cancel(runId, { reason: flags.reason, ...(inherited ? { inherited } : {}) });
        if (flags.wait) {
          run = await waitForStatus(client, run, ["cancelled"], {
            timeoutMs: flags.timeout * 1000,
            onWorkerWait: (text) => !globals.json && info(io, `cancelling: ${text}`),
            onEntry: (entry) => {
              if (!globals.json && (entry.type.startsWith("compensation.") || entry.type.startsWith("resource.") || entry.type === "call.aborted")) info(io, `  ${describeEntry(entry)}`);
            },
          });
        }
        if (globals.json) return out(io, JSON.stringify(run));
        out(io, summary(run));
        const report = run.report;
        if (report) {
          out(io, `report: ${report.compensated.length} compensated, ${report.failed.length} failed, ${report.uncertain.length} uncertain, ${report.released.length} released${report.kept?.length ? `, ${report.kept.length} kept for forks` : ""}`);
          for (const k of report.kept ?? []) out(io, `  kept (not undone): ${k.tool} (call ${k.callSeq}), inherited by ${k.forks.join(", ")}`);
          for (const f of report.failed) out(io, `  NEEDS A PERSON: compensation of ${f.tool} (call ${f.callSeq}) failed: ${f.error}`);
          for (const u of report.uncertain) out(io, `  NEEDS A PERSON: ${u.tool} (call ${u.callSeq}) is uncertain: ${u.reason}`);
        }
      });
    });

  program
    .command("say <run> <message>")
    .description("send a message to a run without pausing it: the agent reads it before its next model call")
    .option("--json", "print the queued message and the run as JSON")
    .action(async function say(this: Command, runId: string, message: string) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const sent = await client.say(runId, message);
        if (globals.json) return out(io, JSON.stringify(sent));
        out(io, `${sent.message.id} queued for ${runId} (${sent.run.status}); the agent reads it before its next model call`);
      });
    });

  program
    .command("approve <run>")
    .description("approve a call waiting for a person's approval: it runs once; the run continues once no call waits")
    .option("--call <n>", "the call to approve (default: every call waiting)", integer("--call", 1))
    .option("--input <json>", "run the call with these arguments instead of the proposed ones", jsonArgument("--input"))
    .option("--note <text>", "why (journaled with your name)")
    .option("--json", "print the run and the decided calls as JSON")
    .action(async function approve(this: Command, runId: string, flags: { call?: number; input?: unknown; note?: string }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const answer = await client.approve(runId, { callSeq: flags.call, input: flags.input as Json | undefined, note: flags.note });
        if (globals.json) return out(io, JSON.stringify(answer));
        for (const d of answer.decided) info(io, `approved ${d.tool} (call ${d.callSeq})${flags.input !== undefined ? ` with ${JSON.stringify(d.decision?.input)}` : ""}`);
        out(io, summary(answer.run));
      });
    });

  program
    .command("reject <run>")
    .description("reject a call waiting for a person's approval: the agent receives your note as the call's result")
    .requiredOption("--note <text>", "why: the agent reads it")
    .option("--call <n>", "the call to reject (default: every call waiting)", integer("--call", 1))
    .option("--json", "print the run and the decided calls as JSON")
    .action(async function reject(this: Command, runId: string, flags: { call?: number; note: string }) {
      await withConnection(this, {}, async ({ client }, globals) => {
        const answer = await client.reject(runId, { callSeq: flags.call, note: flags.note });
        if (globals.json) return out(io, JSON.stringify(answer));
        for (const d of answer.decided) info(io, `rejected ${d.tool} (call ${d.callSeq})`);
        out(io, summary(answer.run));
      });
    });

  program
    .command("fork <run>")
    .description("start a new run from a completed step of a run")
    .requiredOption("--from <step>", "the step to start from", integer("--from"))
    .option("--current-version", "move a run started under an incompatible version of the agent onto the version here")
    .option("--json", "print the new run as JSON")
    .action(async function fork(this: Command, runId: string, flags: { from: number; currentVersion?: boolean }) {
      await withConnection(this, { agents: true }, async ({ client }, globals) => {
        const run = await client.fork(runId, { fromStep: flags.from, currentVersion: flags.currentVersion });
        if (globals.json) return out(io, JSON.stringify(run));
        out(io, run.id);
        info(io, `forked ${runId} at step ${flags.from} into ${run.id}; follow it: tether logs ${run.id} -f`);
      });
    });
}
