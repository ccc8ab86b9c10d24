import { TetherError } from "../engine/errors.js";

/** The CLI's exit codes (docs/cli.md, "Exit codes"). */
export const exitCode = { ok: 0, error: 1, usage: 2, conflict: 3, notFound: 4, corrupt: 5 } as const;

const byErrorCode: Record<string, number> = {
  run_not_found: exitCode.notFound,
  unknown_agent: exitCode.notFound,
  not_found: exitCode.notFound,
  illegal_transition: exitCode.conflict,
  stale_snapshot: exitCode.conflict,
  snapshot_corrupt: exitCode.conflict,
  uncertain_effect: exitCode.conflict,
  halted: exitCode.conflict,
  budget_exceeded: exitCode.conflict,
  already_decided: exitCode.conflict,
  no_pending_approval: exitCode.conflict,
  approval_pending: exitCode.conflict,
  store_corrupt: exitCode.corrupt,
  version_mismatch: exitCode.conflict,
  fork_inherits_effects: exitCode.conflict,
  invalid_input: exitCode.usage,
  invalid_state_patch: exitCode.usage,
  unknown_model: exitCode.usage,
  usage: exitCode.usage,
};

/** What to do next, for each error a person can fix. */
const hints: Record<string, string> = {
  run_not_found: "list runs with `tether ls`",
  unknown_agent: "list agents with `tether agents`",
  illegal_transition: "check the run with `tether show <run>`",
  stale_snapshot: "resume with --force to continue anyway",
  uncertain_effect: "resume with --resolve retry|skip|done",
  snapshot_corrupt: "nothing was deleted; fork the run from an earlier step with `tether fork <run> --from <step>`",
  halted: "lift the halt with `tether unhalt`",
  fork_inherits_effects: "choose with --inherited compensate (undo them anyway) or --inherited keep (leave them for the forks)",
  approval_pending: "decide each call with `tether approve <run> --call N` or `tether reject <run> --call N --note <why>`",
  no_pending_approval: "see what the run waits for with `tether show <run>`",
  store_corrupt: "restore the file from a backup, or fork the damaged runs from a step before the damage",
  store_too_new: "a newer Tether wrote this store: upgrade tether-runtime, or point --db at another file",
  unauthorized: "pass --token or set TETHER_TOKEN (an admin creates one with `tether token create --role operator --name <you>`)",
  forbidden: "use a token with a higher role (viewer < operator < admin)",
  unreachable: "start the server with `tether serve`, pass --url, or use --db <path> to work on the store directly",
};

/** A mistake in how the CLI was called: exit code 2. */
export class UsageError extends Error {
  readonly code = "usage";
  constructor(
    message: string,
    /** What to do about it, when there is more to say than the message. */
    readonly hint?: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}

function codeOf(error: unknown): string | undefined {
  if (TetherError.isInstance(error)) return error.code;
  if (error instanceof UsageError) return "usage";
  return undefined;
}

export function exitCodeFor(error: unknown): number {
  const code = codeOf(error);
  return code === undefined ? exitCode.error : (byErrorCode[code] ?? exitCode.error);
}

/** What went wrong, as the CLI reports it: a stable code (`error` when there is none), the message and what to do. */
export function errorReport(error: unknown): { code: string; message: string; hint?: string } {
  const code = codeOf(error);
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, " ").replace(/\.$/, "");
  const hint = (error instanceof UsageError ? error.hint : undefined) ?? (code ? hints[code] : undefined);
  return { code: code ?? "error", message, ...(hint && !message.includes(hint) ? { hint } : {}) };
}

/** One line: what went wrong, what to do, then the error's code (the one a script matches, as in the API's answers). */
export function errorLine(error: unknown): string {
  const { code, message, hint } = errorReport(error);
  const tag = code === "error" ? "" : ` [${code}]`;
  return hint ? `tether: ${message}: ${hint}${tag}` : `tether: ${message}${tag}`;
}

/** The same as one line of JSON, shaped like the HTTP API's error answers: for `--json`. */
export function errorJson(error: unknown): string {
  return JSON.stringify({ error: errorReport(error) });
}
