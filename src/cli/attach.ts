import { TetherError } from "../engine/errors.js";
import type { RunStreamEvent, TetherClient } from "../client/tether-client.js";
import type { JournalEntry } from "../engine/store.js";
import type { CancelPreviewResponse, RunView } from "../server/api-types.js";
import { errorLine } from "./exit-codes.js";
import { formatCost, formatDuration, formatTokens, isTerminalEntry, journalLine, shortJson } from "./format.js";
import { LogPrinter } from "./log-printer.js";
import { TerminalScreen } from "./terminal-screen.js";

const ctrlC = "\u0003";
const keysHelp = "p pause · r resume · c cancel · q detach";

export interface AttachIo {
  input: NodeJS.ReadStream;
  output: NodeJS.WriteStream;
}

/** What the status line says about work in progress, from the journal as it streams. */
interface Activity {
  call?: { kind: string; name: string; callSeq?: number; since: number };
  compensation?: { tool: string; callSeq?: number; attempt: number; since: number };
}

export function statusLine(run: RunView, activity: Activity, now: number, fetchedAt: number): string {
  const parts = [`[${run.status}]`, `step ${run.step}`, formatTokens(run.usage), formatCost(run.usage.costUsd)];
  const active = run.activeMs + (run.runningSince !== null ? Math.max(0, now - run.runningSince) : 0);
  parts.push(`${formatDuration(active)} active`);
  let detail = "";
  if (run.status === "pausing") {
    const waited = run.waitingForMs !== null ? run.waitingForMs + (now - fetchedAt) : undefined;
    const on = run.waitingFor ?? run.inflight;
    detail = on ? `waiting on ${on.kind} ${on.name}${waited !== undefined ? ` for ${formatDuration(waited)}` : ""}` : "stopping";
  } else if (run.status === "cancelling") {
    const c = activity.compensation;
    detail = c ? `compensating ${c.tool}${c.callSeq !== undefined ? ` (call ${c.callSeq})` : ""}, attempt ${c.attempt}, ${formatDuration(now - c.since)}` : "compensating";
  } else if (run.status === "running" && activity.call) {
    detail = `${activity.call.kind} ${activity.call.name} ${formatDuration(now - activity.call.since)}`;
  } else if (run.status === "paused" || run.status === "halted") {
    detail = run.statusReason ?? "";
  }
  return `${parts.join(" · ")}${detail ? ` · ${detail}` : ""}   ${keysHelp}`;
}

function cancelQuestion(runId: string, preview: CancelPreviewResponse): string {
  if (preview.inherited.length) {
    const forks = preview.forks.map((f) => f.runId).join(", ");
    const effects = preview.inherited.map((e) => `${e.tool} (call ${e.callSeq})`).join(", ");
    return `Cancel ${runId}? Live fork${preview.forks.length === 1 ? "" : "s"} ${forks} inherited ${effects}: y cancels and keeps ${preview.inherited.length === 1 ? "it" : "them"} for the forks, a cancels and undoes ${preview.inherited.length === 1 ? "it" : "them"} too; any other key to keep the run`;
  }
  const undo = preview.compensations.map((c) => `${c.tool} (call ${c.callSeq})`).join(", ");
  const release = preview.resources.length ? `; release ${preview.resources.join(", ")}` : "";
  const uncertain = preview.uncertain.length ? `; uncertain: ${preview.uncertain.map((u) => u.tool).join(", ")}` : "";
  return `Cancel ${runId}? It will undo ${preview.compensations.length ? `${preview.compensations.length}, newest first: ${undo}` : "nothing"}${release}${uncertain}. y to confirm, any other key to keep it`;
}

/**
 * Follows a run in the terminal with keys for pause, resume and cancel. Detaching (q, or
 * Ctrl-C twice) leaves the run as it is; it never kills it.
 */
export async function attach(client: TetherClient, runId: string, io: AttachIo): Promise<void> {
  let run = await client.get(runId);
  if (!io.input.isTTY) return followLogs(client, runId, (t) => io.output.write(t));

  const screen = new TerminalScreen(io.output);
  const stop = new AbortController();
  const activity: Activity = {};
  let fetchedAt = Date.now();
  let confirming: CancelPreviewResponse | undefined;
  let lastKey = "";
  let refreshing = false;
  let refreshAgain = false;

  const render = () => screen.setStatus(statusLine(run, activity, Date.now(), fetchedAt));
  const refresh = async () => {
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = true;
    try {
      do {
        refreshAgain = false;
        run = await client.get(runId);
        fetchedAt = Date.now();
      } while (refreshAgain);
    } catch {
      // Shown stale until the next event or tick.
    } finally {
      refreshing = false;
    }
    render();
  };
  const act = async (label: string, action: () => Promise<RunView>, done = ""): Promise<void> => {
    try {
      screen.setNotice(`${label}…`);
      run = await action();
      fetchedAt = Date.now();
      screen.setNotice(done);
      render();
    } catch (error) {
      screen.setNotice(errorLine(error));
    }
  };

  const onEvent = (event: RunStreamEvent) => {
    if (event.type === "delta") {
      screen.text(event.text);
      return;
    }
    const entry: JournalEntry = event.entry;
    track(activity, entry);
    screen.log(journalLine(entry));
    if (entry.type === "status" || entry.type === "call.started" || entry.type === "call.completed" || entry.type === "call.aborted" || entry.type.startsWith("compensation.")) {
      void refresh();
    }
    if (isTerminalEntry(entry)) screen.setNotice(`run ${entry.data.to} · press q to detach`);
  };

  let detach!: () => void;
  const detached = new Promise<void>((resolve) => (detach = resolve));

  const onKey = (data: Buffer) => {
    const key = data.toString("utf8");
    const previous = lastKey;
    lastKey = key;
    if (confirming) {
      const preview = confirming;
      confirming = undefined;
      const inherited = preview.inherited.length ? (key.toLowerCase() === "a" ? "compensate" : key.toLowerCase() === "y" ? "keep" : undefined) : undefined;
      const undo = inherited === "keep" ? preview.compensations.length - preview.inherited.length : preview.compensations.length;
      if (key.toLowerCase() === "y" || inherited) {
        // What the person agreed to is what is done: when the run changed it meanwhile, ask again.
        void client.cancelPreview(runId).then(
          (now) => {
            if (previewChanged(preview, now)) {
              confirming = now;
              screen.setNotice(`What a cancel would do changed while you decided. ${cancelQuestion(runId, now)}`);
              return;
            }
            void act(`cancelling (${undo} to undo)`, () => client.cancel(runId, { reason: "cancelled from tether attach", ...(inherited ? { inherited } : {}) }));
          },
          (error: unknown) => screen.setNotice(errorLine(error)),
        );
      } else screen.setNotice("kept running: cancel aborted");
      return;
    }
    switch (key) {
      case "p":
        void act("pausing", () => client.pause(runId, { reason: "paused from tether attach" }));
        break;
      case "r":
        void act("resuming", () => client.resume(runId, { reason: "resumed from tether attach" }));
        break;
      case "c":
        void client.cancelPreview(runId).then(
          (preview) => {
            confirming = preview;
            screen.setNotice(cancelQuestion(runId, preview));
          },
          (error: unknown) => screen.setNotice(errorLine(error)),
        );
        break;
      case "q":
        detach();
        break;
      case ctrlC:
        if (previous === ctrlC) {
          detach();
          break;
        }
        if (run.status === "running") void act("pausing (Ctrl-C again to detach)", () => client.pause(runId, { reason: "Ctrl-C in tether attach" }), "pause requested by Ctrl-C · Ctrl-C again to detach, r to resume");
        else screen.setNotice("Ctrl-C again to detach (the run is left as it is)");
        break;
      default:
        break;
    }
  };

  io.input.setRawMode(true);
  io.input.resume();
  io.input.on("data", onKey);
  const ticker = setInterval(render, 200);
  const poller = setInterval(() => void refresh(), 1_000);
  screen.log(`attached to ${runId} (${run.agent}) · ${keysHelp} · Ctrl-C pauses, twice detaches`);
  render();

  const following = (async () => {
    try {
      for await (const event of client.events(runId, { signal: stop.signal })) onEvent(event);
    } catch (error) {
      if (!stop.signal.aborted) screen.setNotice(`${errorLine(error)} · q to detach`);
    }
  })();

  try {
    await detached;
  } finally {
    stop.abort();
    clearInterval(ticker);
    clearInterval(poller);
    io.input.off("data", onKey);
    io.input.setRawMode(false);
    io.input.pause();
    await following;
    await refresh().catch(() => undefined);
    screen.setNotice(`detached from ${runId}; it is ${run.status} (tether attach ${runId} to come back)`);
    screen.finish();
  }
}

function track(activity: Activity, entry: JournalEntry): void {
  const d = entry.data;
  if (entry.type === "call.started") activity.call = { kind: String(d.kind), name: String(d.name), callSeq: entry.callSeq, since: entry.at };
  else if (entry.type === "call.completed" || entry.type === "call.failed" || entry.type === "call.aborted") activity.call = undefined;
  else if (entry.type === "compensation.started") activity.compensation = { tool: String(d.tool), callSeq: entry.callSeq, attempt: Number(d.attempt ?? 1), since: entry.at };
  else if (entry.type === "compensation.succeeded" || (entry.type === "compensation.failed" && d.final)) activity.compensation = undefined;
}

/** Prints the run's log as it happens until the run ends. */
export async function followLogs(
  client: TetherClient,
  runId: string,
  write: (text: string) => void,
  options: { after?: number; signal?: AbortSignal; text?: boolean; stopWhen?: (entry: JournalEntry) => boolean } = {},
): Promise<void> {
  const printer = new LogPrinter(client, runId, write, { text: options.text });
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  try {
    for await (const event of client.events(runId, { after: options.after, signal })) {
      await printer.print(event);
      if (event.type === "journal" && (isTerminalEntry(event.entry) || options.stopWhen?.(event.entry))) stop.abort();
    }
  } catch (error) {
    if (!(TetherError.isInstance(error) && signal.aborted)) throw error;
  } finally {
    printer.endText();
  }
}

/**
 * Whether what a cancel would do changed between two previews: the run keeps working while a
 * person reads the first, and may complete an effect (or a fork may inherit one) meanwhile.
 */
export function previewChanged(before: CancelPreviewResponse, after: CancelPreviewResponse): boolean {
  const seqs = (items: readonly { callSeq: number }[]) => items.map((i) => i.callSeq).sort((a, b) => a - b).join(",");
  return (
    before.cancellable !== after.cancellable ||
    seqs(before.compensations) !== seqs(after.compensations) ||
    seqs(before.inherited) !== seqs(after.inherited) ||
    seqs(before.uncertain) !== seqs(after.uncertain) ||
    [...before.resources].sort().join(",") !== [...after.resources].sort().join(",")
  );
}

export function previewLines(runId: string, preview: CancelPreviewResponse, inherited?: "compensate" | "keep"): string[] {
  const lines = [`Cancelling ${runId} (${preview.status}) will:`];
  // With `keep`, the effects the forks inherited are not undone.
  const kept = new Set(inherited === "keep" ? preview.inherited.map((e) => e.callSeq) : []);
  const undo = preview.compensations.filter((c) => !kept.has(c.callSeq));
  if (undo.length === 0) lines.push(kept.size ? "  undo nothing (every effect it would undo is kept for the forks)" : "  undo nothing (no effect with a compensation has completed)");
  else {
    lines.push(`  undo ${undo.length} effect${undo.length === 1 ? "" : "s"}, newest first:`);
    for (const c of undo) lines.push(`    call ${c.callSeq}  ${c.tool} ${shortJson(c.input, 60)}`);
  }
  if (preview.resources.length) lines.push(`  release ${preview.resources.join(", ")}`);
  for (const u of preview.uncertain) lines.push(`  leave uncertain: ${u.tool} (call ${u.callSeq}) may or may not have happened; it is flagged in the report`);
  if (preview.inherited.length) {
    lines.push(`  but live fork${preview.forks.length === 1 ? "" : "s"} inherited ${preview.inherited.length} of these effects and still rel${preview.forks.length === 1 ? "ies" : "y"} on them:`);
    for (const f of preview.forks) {
      const effects = preview.inherited.filter((e) => e.forks.includes(f.runId)).map((e) => `${e.tool} (call ${e.callSeq})`);
      lines.push(`    ${f.runId} (${f.status}, forked from step ${f.fromStep}): ${effects.join(", ")}`);
    }
    lines.push(`  ${inherited === "keep" ? "--inherited keep: they stay (listed in the report as kept)" : inherited === "compensate" ? "--inherited compensate: they are undone too" : "choose: --inherited keep (they stay, listed as kept) or --inherited compensate (undo them too)"}`);
  }
  return lines;
}
