import { describe, expect, it } from "vitest";
import { TetherClientError } from "../../src/client/client-error.js";
import { IllegalTransitionError, RunNotFoundError, StaleSnapshotError, StoreCorruptError } from "../../src/engine/errors.js";
import { errorJson, errorLine, exitCodeFor, UsageError } from "../../src/cli/exit-codes.js";

describe("CLI exit codes and error lines", () => {
  it("maps each error code to its exit code", () => {
    const api = (code: string, status: number) => new TetherClientError(code, status, `${code} happened`);
    expect(exitCodeFor(api("run_not_found", 404))).toBe(4);
    expect(exitCodeFor(api("unknown_agent", 404))).toBe(4);
    expect(exitCodeFor(api("illegal_transition", 409))).toBe(3);
    expect(exitCodeFor(api("stale_snapshot", 409))).toBe(3);
    expect(exitCodeFor(api("uncertain_effect", 409))).toBe(3);
    expect(exitCodeFor(api("invalid_input", 400))).toBe(2);
    expect(exitCodeFor(api("unauthorized", 401))).toBe(1);
    expect(exitCodeFor(api("unreachable", 0))).toBe(1);
    expect(exitCodeFor(new UsageError("bad"))).toBe(2);
    expect(exitCodeFor(new StaleSnapshotError("run_1", ["old"]))).toBe(3);
    expect(exitCodeFor(new IllegalTransitionError("run_1", "pause", "completed"))).toBe(3);
    expect(exitCodeFor(new RunNotFoundError("run_1"))).toBe(4);
    expect(exitCodeFor(new StoreCorruptError("tether.db", "journal entry 3 of run run_1 fails its checksum"))).toBe(5);
    expect(exitCodeFor(new Error("boom"))).toBe(1);
  });

  it("says what to do, on one line", () => {
    expect(errorLine(new TetherClientError("stale_snapshot", 409, "run run_1 has a stale snapshot: the snapshot is 90 s old"))).toBe(
      "tether: run run_1 has a stale snapshot: the snapshot is 90 s old: resume with --force to continue anyway [stale_snapshot]",
    );
    expect(errorLine(new TetherClientError("unauthorized", 401, "a token is required"))).toContain("pass --token or set TETHER_TOKEN");
    expect(errorLine(new Error("two\nlines"))).toBe("tether: two lines");
    expect(errorLine(new RunNotFoundError("run_1"))).toMatch(/ \[run_not_found\]$/);
  });

  it("reports an error as JSON, shaped like the API's answers", () => {
    expect(JSON.parse(errorJson(new TetherClientError("stale_snapshot", 409, "run run_1 has a stale snapshot.")))).toEqual({
      error: { code: "stale_snapshot", message: "run run_1 has a stale snapshot", hint: "resume with --force to continue anyway" },
    });
    expect(JSON.parse(errorJson(new Error("boom")))).toEqual({ error: { code: "error", message: "boom" } });
  });
});
