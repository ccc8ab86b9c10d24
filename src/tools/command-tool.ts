import { tool, type Tool, type ToolContext, type ToolDefinition } from "../engine/tool.js";
import { runCommand, type CommandResult, type CommandSpec, type CommandStream } from "./command.js";

export interface CommandToolDefinition<I, O> extends Omit<ToolDefinition<I, O>, "execute" | "abortable"> {
  /** The command a call runs. Throw to refuse the call (the model gets the message). */
  command(input: I, ctx: ToolContext): CommandSpec | Promise<CommandSpec>;
  /** The call's result from the finished command; throw to fail the call. Default: the `CommandResult` itself. */
  result?(result: CommandResult, input: I): O | Promise<O>;
  /** After SIGTERM, how long the command's group has before SIGKILL. Default 5000. */
  graceMs?: number;
  /** Output kept per stream in the `CommandResult`: its last this many bytes. Default 1 MiB. */
  maxOutputBytes?: number;
  /** Output journaled per call as `call.progress`; beyond it output is only counted. Default 64 KiB. */
  journalOutputBytes?: number;
  /** Output is journaled in pieces of at most this many bytes, or after `journalEveryMs`. Default 8 KiB. */
  journalChunkBytes?: number;
  /** Default 250. */
  journalEveryMs?: number;
}

/**
 * A tool that runs a command (`runCommand`): abortable, so a pause, cancel, halt or timeout
 * stops the command's whole process group (SIGTERM, then SIGKILL after `graceMs`) and the call
 * ends only once nothing of it is left; its output streams to the journal as `call.progress`
 * entries (`message` the text, `stream` stdout or stderr, `progress` the bytes so far).
 */
export function commandTool<I>(definition: CommandToolDefinition<I, CommandResult> & { result?: undefined }): Tool<I, CommandResult>;
export function commandTool<I, O>(definition: CommandToolDefinition<I, O> & { result(result: CommandResult, input: I): O | Promise<O> }): Tool<I, O>;
export function commandTool<I, O>(definition: CommandToolDefinition<I, O>): Tool<I, O> {
  const { command, result, graceMs, maxOutputBytes, journalOutputBytes, journalChunkBytes, journalEveryMs, ...rest } = definition;
  return tool<I, O>({
    ...rest,
    abortable: true,
    async execute(input, ctx) {
      const spec = await command(input, ctx);
      const journal = new OutputJournal(ctx, { limitBytes: journalOutputBytes ?? 64 * 1024, chunkBytes: journalChunkBytes ?? 8 * 1024, everyMs: journalEveryMs ?? 250 });
      let finished: CommandResult;
      try {
        finished = await runCommand({ ...spec, signal: ctx.signal, graceMs, maxOutputBytes, onOutput: (stream, text) => journal.write(stream, text) });
      } finally {
        journal.close();
      }
      if (finished.aborted) throw ctx.signal.reason ?? new Error("aborted");
      return result ? result(finished, input) : (finished as O);
    },
  });
}

/**
 * Batches a command's output into `call.progress` entries: one per piece of `chunkBytes`, or
 * per `everyMs` of output, so a chatty command costs a few journal writes a second, and at most
 * `limitBytes` of it in all.
 */
class OutputJournal {
  private stream: CommandStream = "stdout";
  private buffered = "";
  private bufferedBytes = 0;
  private totalBytes = 0;
  private journaledBytes = 0;
  private overLimit = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ToolContext,
    private readonly options: { limitBytes: number; chunkBytes: number; everyMs: number },
  ) {}

  write(stream: CommandStream, text: string): void {
    const bytes = Buffer.byteLength(text);
    this.totalBytes += bytes;
    if (this.overLimit) return;
    if (stream !== this.stream) {
      this.flush();
      this.stream = stream;
    }
    this.buffered += text;
    this.bufferedBytes += bytes;
    if (this.bufferedBytes >= this.options.chunkBytes) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.options.everyMs).unref();
  }

  close(): void {
    this.flush();
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.buffered) return;
    let text = this.buffered;
    const room = this.options.limitBytes - this.journaledBytes;
    if (this.bufferedBytes > room) {
      text = Buffer.from(text).subarray(0, room).toString("utf8").replace(/\uFFFD$/, "");
      this.overLimit = true;
    }
    this.buffered = "";
    this.bufferedBytes = 0;
    this.journaledBytes += Buffer.byteLength(text);
    const progress = this.totalBytes;
    if (text) this.ctx.progress({ progress, message: text, stream: this.stream });
    if (this.overLimit) {
      this.ctx.progress({ progress, message: `[output beyond ${this.options.limitBytes} bytes is not journaled; the call's result keeps its end]`, stream: this.stream });
    }
  }
}
