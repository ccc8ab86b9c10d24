import { spawn } from "node:child_process";
import { StringDecoder } from "node:string_decoder";
import { InvalidInputError } from "../engine/errors.js";
import { groupAlive, groupGone, signalGroup } from "./process-group.js";

export type CommandStream = "stdout" | "stderr";

/** What to run: an executable with its arguments (no shell), or one shell command line (`/bin/sh -c`). */
export type CommandSpec = ({ command: string; args?: readonly string[]; shell?: undefined } | { shell: string; command?: undefined; args?: undefined }) & {
  cwd?: string;
  /** The whole environment of the command. Default: this process's. */
  env?: NodeJS.ProcessEnv;
};

export type RunCommandOptions = CommandSpec & {
  /** Stops the command: SIGTERM to its whole process group, SIGKILL after `graceMs`. */
  signal?: AbortSignal;
  /** How long the group has to exit after SIGTERM before SIGKILL. Default 5000. */
  graceMs?: number;
  /** Each chunk of output as it arrives, decoded as UTF-8. */
  onOutput?(stream: CommandStream, text: string): void;
  /** Output kept per stream in the result: the last this many bytes. Default 1 MiB. */
  maxOutputBytes?: number;
  /** The command's pid, which is also its process group's id. */
  onSpawn?(pid: number): void;
};

export interface CommandResult {
  /** The exit code, or null when a signal ended it. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The last `maxOutputBytes` of standard output. */
  stdout: string;
  stderr: string;
  /** Bytes written in all, kept or not. */
  stdoutBytes: number;
  stderrBytes: number;
  /** Some output was dropped from the front of `stdout` or `stderr`. */
  truncated: boolean;
  /** The signal fired before the command ended, and its process group was stopped. */
  aborted: boolean;
  /** Something in the group outlived SIGTERM by `graceMs` and was SIGKILLed. */
  killed: boolean;
}

const defaultGraceMs = 5_000;
const defaultMaxOutputBytes = 1024 * 1024;
/** After SIGKILL only a process stuck in the kernel can stay; stop waiting for it after this. */
const killWaitMs = 5_000;
/** Output pipes close once nothing holds them; one that left the group (`setsid`) may never let go. */
const pipeDrainMs = 1_000;

/** Groups started here and not yet gone, stopped if this process exits first. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function killLiveGroupsOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const pgid of liveGroups) signalGroup(pgid, "SIGKILL");
  });
}

/**
 * Runs a command in its own process group (`detached`), streaming its output, and stops the
 * whole group, children and grandchildren, when `signal` fires: SIGTERM, then SIGKILL after
 * `graceMs`. Resolves once the group is gone, with the exit status and the bounded output.
 * When the command exits by itself, whatever it left running in its group is stopped the same
 * way: a command leaves nothing behind. POSIX only (Linux, macOS).
 */
export async function runCommand(options: RunCommandOptions): Promise<CommandResult> {
  const { file, args } = executableOf(options);
  const graceMs = nonNegative(options.graceMs, defaultGraceMs, "graceMs");
  const maxOutputBytes = nonNegative(options.maxOutputBytes, defaultMaxOutputBytes, "maxOutputBytes");
  const { signal } = options;
  const stdout = new OutputTail(maxOutputBytes);
  const stderr = new OutputTail(maxOutputBytes);
  const finish = (exit: { code: number | null; signal: NodeJS.Signals | null }, flags: { aborted: boolean; killed: boolean }): CommandResult => ({
    exitCode: exit.code,
    signal: exit.signal,
    stdout: stdout.text(),
    stderr: stderr.text(),
    stdoutBytes: stdout.bytes,
    stderrBytes: stderr.bytes,
    truncated: stdout.truncated || stderr.truncated,
    ...flags,
  });
  if (signal?.aborted) return finish({ code: null, signal: null }, { aborted: true, killed: false });

  const child = spawn(file, args, { cwd: options.cwd, env: options.env ?? process.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, sig) => resolve({ code, signal: sig })));
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
  } catch (error) {
    throw new Error(`could not start ${JSON.stringify(file)}${options.cwd ? ` in ${options.cwd}` : ""}: ${(error as Error).message}`, { cause: error });
  }
  // Later errors (a failed kill of a process already gone) change nothing: the exit decides.
  child.on("error", () => undefined);
  const pgid = child.pid!;
  liveGroups.add(pgid);
  killLiveGroupsOnExit();
  options.onSpawn?.(pgid);

  let leaderExited = false;
  let aborted = false;
  let stopping: Promise<boolean> | undefined;
  const stop = () => (stopping ??= stopGroup(pgid, graceMs));
  /** A throw in `onOutput` stops the command, and `runCommand` rejects with it once the group is gone. */
  let outputError: { error: unknown } | undefined;
  const emit = (stream: CommandStream, text: string) => {
    if (!text || !options.onOutput || outputError) return;
    try {
      options.onOutput(stream, text);
    } catch (error) {
      outputError = { error };
      void stop();
    }
  };
  for (const [stream, tail] of [["stdout", stdout], ["stderr", stderr]] as const) {
    const decoder = new StringDecoder("utf8");
    const pipe = child[stream]!;
    pipe.on("data", (chunk: Buffer) => {
      tail.push(chunk);
      emit(stream, decoder.write(chunk));
    });
    pipe.on("end", () => emit(stream, decoder.end()));
  }
  const onAbort = () => {
    if (leaderExited) return;
    aborted = true;
    void stop();
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort(); // fired while the command was starting
  try {
    const exit = await exited;
    leaderExited = true;
    const killed = stopping || groupAlive(pgid) ? await stop() : false;
    liveGroups.delete(pgid);
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, pipeDrainMs).unref())]);
    child.stdout?.destroy();
    child.stderr?.destroy();
    if (outputError) throw outputError.error;
    return finish(exit, { aborted, killed });
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/** SIGTERM to the group, SIGKILL to what is left after `graceMs`; true if SIGKILL was needed. */
async function stopGroup(pgid: number, graceMs: number): Promise<boolean> {
  if (!signalGroup(pgid, "SIGTERM")) return false;
  if (await groupGone(pgid, graceMs)) return false;
  signalGroup(pgid, "SIGKILL");
  await groupGone(pgid, killWaitMs);
  return true;
}

function executableOf(spec: CommandSpec): { file: string; args: string[] } {
  if (spec.shell !== undefined) {
    if (spec.command !== undefined) throw new InvalidInputError("give either `command` (with `args`) or `shell`, not both");
    if (typeof spec.shell !== "string" || spec.shell.trim() === "") throw new InvalidInputError("`shell` must be a command line, e.g. { shell: \"npm test\" }");
    return { file: "/bin/sh", args: ["-c", spec.shell] };
  }
  if (typeof spec.command !== "string" || spec.command.trim() === "") {
    throw new InvalidInputError("`command` must name an executable, e.g. { command: \"git\", args: [\"status\"] }, or pass `shell` for a command line");
  }
  if (spec.args !== undefined && (!Array.isArray(spec.args) || !spec.args.every((a) => typeof a === "string"))) {
    throw new InvalidInputError("`args` must be a list of strings");
  }
  return { file: spec.command, args: [...(spec.args ?? [])] };
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw new InvalidInputError(`\`${name}\` must be a number of at least 0 (got ${String(value)})`);
  return value;
}

/** The last `max` bytes of a stream, and how many it wrote in all. */
class OutputTail {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  bytes = 0;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    this.chunks.push(chunk);
    this.kept += chunk.length;
    while (this.chunks.length > 1 && this.kept - this.chunks[0].length >= this.max) this.kept -= this.chunks.shift()!.length;
  }

  get truncated(): boolean {
    return this.bytes > this.max;
  }

  text(): string {
    let buffer = Buffer.concat(this.chunks);
    if (buffer.length > this.max) {
      let start = buffer.length - this.max;
      // Start on a whole character: skip UTF-8 continuation bytes.
      while (start < buffer.length && (buffer[start] & 0xc0) === 0x80) start++;
      buffer = buffer.subarray(start);
    }
    return buffer.toString("utf8");
  }
}
