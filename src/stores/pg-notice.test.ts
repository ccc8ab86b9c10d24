import { describe, expect, it } from "vitest";
import { newRunRecord } from "../engine/run-record.js";
import type { Json } from "../engine/json.js";
import type { RunRecord } from "../engine/store.js";
import { readRunNotice, runNotice } from "./pg-notice.js";
import { pgRunChecksum, runRowOf } from "./pg-schema.js";

function record(id: string, input: Json = { topic: "tides" }): RunRecord {
  return newRunRecord({ id, agent: "researcher", agentVersion: "1", owner: "o", status: "running", input, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1_000 });
}

function noticeOf(run: RunRecord, varsSeq = 2): { payload: string; doc: string } {
  const doc = JSON.stringify(run);
  return { payload: runNotice(run, varsSeq, doc, pgRunChecksum(runRowOf(run, varsSeq, doc))), doc };
}

describe("run notifications", () => {
  it("carry the row a write leaves, read back as the record, its JSON and its vars sequence", () => {
    const run = record("run_1");
    const { payload, doc } = noticeOf(run, 7);
    const notice = readRunNotice(payload);
    expect(notice.runId).toBe("run_1");
    expect(notice.row()).toEqual({ record: run, doc, varsSeq: 7 });
  });

  it("keep a run id with colons whole", () => {
    const run = record("tenant:a:run_1");
    const notice = readRunNotice(noticeOf(run).payload);
    expect(notice.runId).toBe("tenant:a:run_1");
    expect(notice.row()?.record).toEqual(run);
  });

  it("name a run by its id alone when its row would pass PostgreSQL's 8,000-byte limit, counted in bytes", () => {
    // 3,800 two-byte characters: under 8,000 characters, over 8,000 bytes.
    const payload = noticeOf(record("run_big", { text: "é".repeat(3800) })).payload;
    expect(payload).toBe("run_big");
    expect(readRunNotice(payload)).toMatchObject({ runId: "run_big" });
    expect(readRunNotice(payload).row()).toBeUndefined();
    const fits = noticeOf(record("run_fits", { text: "é".repeat(1000) })).payload;
    expect(Buffer.byteLength(fits)).toBeLessThan(8000);
    expect(readRunNotice(fits).row()).toBeDefined();
  });

  it("read a plain id as an id, and an empty payload as anything changed", () => {
    expect(readRunNotice("run_2").runId).toBe("run_2");
    expect(readRunNotice("run_2").row()).toBeUndefined();
    expect(readRunNotice("*").runId).toBe("*");
    expect(readRunNotice("").runId).toBe("*");
  });

  it("never hand on a row whose checksum fails, whose JSON does not parse, or whose record is another run's or another version's", () => {
    const run = record("run_3");
    const { payload } = noticeOf(run);
    const tampered = payload.replace('"status":"running"', '"status":"completed"');
    expect(tampered).not.toBe(payload);
    expect(readRunNotice(tampered)).toMatchObject({ runId: "run_3" });
    expect(readRunNotice(tampered).row()).toBeUndefined();
    expect(readRunNotice(payload.replace(/\n.*$/s, "\n{not json")).row()).toBeUndefined();
    expect(readRunNotice(payload.replace(":run_3\n", ":run_4\n")).row()).toBeUndefined();
    expect(readRunNotice(payload.replace(/^row:\d+:/, "row:999:")).row()).toBeUndefined();
  });
});
