import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { exampleAsset } from "../shared/package-root.js";
import { completedCalls, exampleHarness, type ExampleHarness } from "../shared/test-harness.js";
import { codeAgent, defaultCodeTask } from "./agent.js";
import { acquireWorkspaceLock, readLock, WorkspaceLockedError } from "./workspace-lock.js";
import { Workspace } from "./workspace.js";

const template = exampleAsset("code-agent", "workspace-template");
let harness: ExampleHarness | undefined;
afterEach(async () => {
  await harness?.dispose();
  harness = undefined;
});

/** Every file under the folder (Tether's own included) with its bytes. */
function tree(root: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = join(entry.parentPath, entry.name);
    files[full.slice(root.length + 1)] = readFileSync(full, "utf8");
  }
  return files;
}

function setup(tokensPerSecond: number, options: { leaseMs?: number } = {}): { workspace: string; lockPath: string; original: Record<string, string> } {
  harness = exampleHarness((dataDir) => [codeAgent({ workspace: join(dataDir, "workspace"), tokensPerSecond })], options);
  const workspace = join(harness.dir, "data", "workspace");
  new Workspace(workspace).ensureSeeded(template);
  return { workspace, lockPath: join(workspace, ".tether.lock"), original: tree(workspace) };
}

describe("code-agent", () => {
  it("fixes the bug through drafts, runs the tests, and leaves no lock or drafts behind", async () => {
    const { workspace, lockPath, original } = setup(4000);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    const done = await harness!.runtime.waitFor(run.id, ["completed", "failed"]);
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    const after = tree(workspace);
    expect(Object.keys(after).sort()).toEqual(Object.keys(original).sort());
    expect(after["src/range.js"]).toContain("i <= end");
    expect(after["test/range.test.js"]).toContain("a single-element range includes its only value");
    expect(after["CHANGELOG.md"]).toContain("## Unreleased\n- Fix:");
    expect(existsSync(lockPath)).toBe(false);
    const journal = await harness!.runtime.journal(run.id, { limit: 10_000 });
    const testRuns = completedCalls(journal, "run_tests");
    expect(testRuns).toHaveLength(2);
    // The test runs' output streamed to the journal as it came, for each of the two calls.
    const runTestsCalls = new Set(journal.filter((e) => e.type === "call.started" && e.data.name === "run_tests").map((e) => e.callSeq));
    const streamed = journal.filter((e) => e.type === "call.progress" && runTestsCalls.has(e.callSeq) && e.data.stream === "stdout");
    expect(new Set(streamed.map((e) => e.callSeq)).size).toBe(2);
    expect(streamed.map((e) => String(e.data.message)).join("")).toContain("# pass 4");
    expect(String(done.output)).toContain("4 of 4 tests pass");
  });

  it("cancelled mid-edit: drafts discarded, applied files restored byte for byte, lock released", async () => {
    const { workspace, lockPath, original } = setup(4000);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    await harness!.journalUntil(run.id, (journal) => completedCalls(journal, "apply_draft").length === 1 && completedCalls(journal, "write_draft").length === 2);
    expect(readLock(lockPath)?.runId).toBe(run.id);
    expect(readFileSync(join(workspace, "src/range.js"), "utf8")).toContain("i <= end");

    await harness!.runtime.cancel(run.id, { actor: "test" });
    const cancelled = await harness!.runtime.waitFor(run.id, ["cancelled"]);
    expect(existsSync(lockPath)).toBe(false);
    expect(existsSync(join(workspace, ".tether-drafts"))).toBe(false);
    expect(tree(workspace)).toEqual(original);
    // Newest first: the test draft, the applied fix, the fix's draft.
    const undone = cancelled.report!.compensated;
    expect(undone.map((c) => c.tool)).toEqual(["write_draft", "apply_draft", "write_draft"]);
    expect(undone.map((c) => c.callSeq)).toEqual(undone.map((c) => c.callSeq).sort((a, b) => b - a));
    expect(cancelled.report!.failed).toEqual([]);
    expect(cancelled.report!.released).toEqual(["workspace-lock"]);
  });

  it("pause frees the lock and resume takes it again", async () => {
    const { lockPath } = setup(1000);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    await harness!.journalUntil(run.id, (journal) => completedCalls(journal, "read_file").length >= 1);
    expect(readLock(lockPath)?.runId).toBe(run.id);
    await harness!.runtime.pause(run.id, { actor: "test" });
    await harness!.runtime.waitFor(run.id, ["paused"]);
    expect(existsSync(lockPath)).toBe(false);

    await harness!.runtime.resume(run.id, { actor: "test" });
    let heldAfterResume: string | undefined;
    await harness!.journalUntil(run.id, (journal) => {
      if (journal.filter((e) => e.type === "resource.acquired").length < 2) return false;
      heldAfterResume = readLock(lockPath)?.runId;
      return true;
    });
    expect(heldAfterResume).toBe(run.id);
    const done = await harness!.runtime.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(existsSync(lockPath)).toBe(false);
  });

  it("cancelled while paused: restores the files without a lock left behind", async () => {
    const { workspace, lockPath, original } = setup(4000);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    await harness!.journalUntil(run.id, (journal) => completedCalls(journal, "apply_draft").length === 2);
    await harness!.runtime.pause(run.id, { actor: "test" });
    await harness!.runtime.waitFor(run.id, ["paused"]);
    expect(existsSync(lockPath)).toBe(false);
    await harness!.runtime.cancel(run.id, { actor: "test" });
    const cancelled = await harness!.runtime.waitFor(run.id, ["cancelled"]);
    expect(cancelled.report!.failed).toEqual([]);
    expect(existsSync(lockPath)).toBe(false);
    expect(tree(workspace)).toEqual(original);
  });

  it("refuses to start on a workspace another live run holds, and leaves that lock alone", async () => {
    const { lockPath, original } = setup(4000);
    const foreign = `${JSON.stringify({ runId: "run_other", pid: process.pid, acquiredAt: "2026-01-01T00:00:00.000Z" })}\n`;
    writeFileSync(lockPath, foreign);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    const failed = await harness!.runtime.waitFor(run.id, ["failed", "completed"]);
    expect(failed.status).toBe("failed");
    expect(failed.error?.message).toContain("locked by run run_other");
    expect(readFileSync(lockPath, "utf8")).toBe(foreign);
    const { [".tether.lock"]: _, ...rest } = tree(join(harness!.dir, "data", "workspace"));
    expect(rest).toEqual(original);
  });

  it("after a crash another worker takes over the run's own stale lock and finishes", async () => {
    const { workspace, lockPath } = setup(1000, { leaseMs: 300 });
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    await harness!.journalUntil(run.id, (journal) => completedCalls(journal, "apply_draft").length === 1);
    await harness!.runtime.close();
    expect(readLock(lockPath)?.runId).toBe(run.id);

    const survivor = harness!.spawnRuntime();
    const done = await survivor.waitFor(run.id, ["completed", "failed"], { timeoutMs: 20_000 });
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(readFileSync(join(workspace, "src/range.js"), "utf8")).toContain("i <= end");
    expect(existsSync(lockPath)).toBe(false);
    const journal = await survivor.journal(run.id, { limit: 10_000 });
    expect(journal.some((e) => e.type === "recovery")).toBe(true);
  });
});

describe("code-agent and a person's edits", () => {
  it("refuses to resume over a file changed while paused, and a cancel then leaves that file for a person", async () => {
    const { workspace, lockPath, original } = setup(4000);
    const run = await harness!.runtime.start("code-agent", defaultCodeTask);
    await harness!.journalUntil(run.id, (journal) => completedCalls(journal, "apply_draft").length >= 1);
    await harness!.runtime.pause(run.id, { actor: "test" });
    await harness!.runtime.waitFor(run.id, ["paused"]);
    const edited = `${readFileSync(join(workspace, "src/range.js"), "utf8")}// reviewed by hand\n`;
    writeFileSync(join(workspace, "src/range.js"), edited);

    await expect(harness!.runtime.resume(run.id, { actor: "test" })).rejects.toMatchObject({ code: "stale_snapshot" });
    await harness!.runtime.cancel(run.id, { actor: "test" });
    const cancelled = await harness!.runtime.waitFor(run.id, ["cancelled"], { timeoutMs: 20_000 });
    expect(cancelled.report!.failed.map((f) => [f.tool, f.error])).toEqual([["apply_draft", expect.stringContaining("src/range.js was changed after the run applied its draft")]]);
    const after = tree(workspace);
    expect(after["src/range.js"]).toBe(edited);
    const { ["src/range.js"]: _edited, ...rest } = after;
    const { ["src/range.js"]: _original, ...originalRest } = original;
    expect(rest).toEqual(originalRest);
    expect(existsSync(lockPath)).toBe(false);
  });
});

describe("workspace lock", () => {
  function freshWorkspace(): Workspace {
    harness = exampleHarness(() => []);
    const workspace = new Workspace(join(harness.dir, "ws"));
    workspace.ensureSeeded(template);
    return workspace;
  }

  it("takes over a lock the same run left behind", () => {
    const workspace = freshWorkspace();
    const lockPath = join(workspace.root, ".tether.lock");
    writeFileSync(lockPath, JSON.stringify({ runId: "run_a", pid: 999_999_999, acquiredAt: "x" }));
    acquireWorkspaceLock(workspace, "run_a");
    expect(readLock(lockPath)).toMatchObject({ runId: "run_a", pid: process.pid });
  });

  it("takes over the lock of a process that is gone, and refuses one held by a live process", () => {
    const workspace = freshWorkspace();
    const lockPath = join(workspace.root, ".tether.lock");
    const gone = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
    writeFileSync(lockPath, JSON.stringify({ runId: "run_dead", pid: Number(gone.stdout.trim()), acquiredAt: "x" }));
    acquireWorkspaceLock(workspace, "run_b");
    expect(readLock(lockPath)?.runId).toBe("run_b");
    expect(() => acquireWorkspaceLock(workspace, "run_c")).toThrow(WorkspaceLockedError);
    expect(readLock(lockPath)?.runId).toBe("run_b");
  });
});
