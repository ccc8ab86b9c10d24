import { describe, expect, it } from "vitest";
import type { RunStreamEvent, TetherClient } from "../client/tether-client.js";
import type { JournalEntry } from "../engine/store.js";
import { LogPrinter } from "./log-printer.js";

const entry = (seq: number, type: string, data: Record<string, unknown> = {}, callSeq?: number): RunStreamEvent => ({
  type: "journal",
  id: String(seq),
  seq,
  entry: { runId: "run_1", seq, type, at: 1_000 + seq, ...(callSeq === undefined ? {} : { callSeq }), data } as JournalEntry,
});
const delta = (seq: number, sub: number, callSeq: number, text: string, offset: number): RunStreamEvent => ({ type: "delta", id: `${seq}.${sub}`, seq, sub, callSeq, text, offset });

async function printed(events: RunStreamEvent[]): Promise<string> {
  let out = "";
  const client = { state: async () => ({ state: { messages: [] } }) } as unknown as TetherClient;
  const printer = new LogPrinter(client, "run_1", (text) => (out += text));
  for (const event of events) await printer.print(event);
  printer.endText();
  return out;
}

describe("LogPrinter", () => {
  it("prints a call's streamed text from its start when it followed the call from the start", async () => {
    const out = await printed([entry(2, "call.started", { kind: "model", name: "sim" }, 1), delta(2, 1, 1, "Hello ", 0), delta(2, 2, 1, "world", 6)]);
    expect(out).toContain("│ Hello world\n");
    expect(out).not.toContain("…");
  });

  it("marks the text of a call it joined mid-stream with … where the missed start was", async () => {
    const out = await printed([entry(2, "call.started", { kind: "model", name: "sim" }, 1), delta(2, 7, 1, "world", 6), delta(2, 8, 1, "!", 11)]);
    expect(out).toContain("│ …world!\n");
  });
});
