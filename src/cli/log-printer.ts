import type { TetherClient, RunStreamEvent } from "../client/tether-client.js";
import type { JournalEntry } from "../engine/store.js";
import type { Message } from "../engine/state.js";
import { journalLine } from "./format.js";

const textIndent = "      │ ";

/**
 * Prints a run's events as a log: one line per journal entry, and model text as it streams
 * (or, for calls that finished before we were watching, the text from the stored state).
 */
export class LogPrinter {
  private inText = false;
  private readonly streamedCalls = new Set<number>();
  private messages: Message[] | undefined;

  constructor(
    private readonly client: TetherClient,
    private readonly runId: string,
    private readonly write: (text: string) => void,
    private readonly options: { text?: boolean } = {},
  ) {}

  async print(event: RunStreamEvent): Promise<void> {
    if (event.type === "delta") {
      if (this.options.text === false) return;
      const joinedMidCall = !this.streamedCalls.has(event.callSeq) && event.offset > 0;
      this.streamedCalls.add(event.callSeq);
      if (!this.inText) {
        this.write(textIndent);
        this.inText = true;
      }
      // Attached while the call streamed: its first characters went by before; say so.
      if (joinedMidCall) this.write("…");
      this.write(event.text.replace(/\n/g, `\n${textIndent}`));
      return;
    }
    this.endText();
    this.write(`${journalLine(event.entry)}\n`);
    if (this.options.text !== false) await this.printStoredText(event.entry);
  }

  /** Ends a streamed text line, so what follows starts on its own line. */
  endText(): void {
    if (this.inText) {
      this.write("\n");
      this.inText = false;
    }
  }

  private async printStoredText(entry: JournalEntry): Promise<void> {
    if (entry.type !== "call.completed" || entry.data.kind !== "model" || entry.callSeq === undefined) return;
    if (this.streamedCalls.has(entry.callSeq)) return;
    const index = entry.data.resultInMessage;
    let text: string | undefined;
    if (typeof index === "number") {
      const message = await this.message(index);
      text = message?.role === "assistant" ? message.content : undefined;
    } else {
      const result = entry.data.result as { text?: unknown } | undefined;
      text = typeof result?.text === "string" ? result.text : undefined;
    }
    if (text) this.write(`${textIndent}${text.replace(/\n/g, `\n${textIndent}`)}\n`);
  }

  private async message(index: number): Promise<Message | undefined> {
    if (!this.messages || index >= this.messages.length) {
      try {
        this.messages = (await this.client.state(this.runId)).state.messages;
      } catch {
        return undefined;
      }
    }
    return this.messages[index];
  }
}
