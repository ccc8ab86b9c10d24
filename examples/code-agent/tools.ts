import { z } from "zod";
import { tool, type AnyTool, type CompensationContext, type ToolContext } from "../../src/engine/tool.js";
import type { CommandResult } from "../../src/tools/command.js";
import { commandTool } from "../../src/tools/command-tool.js";
import { delay } from "../shared/delay.js";
import { acquireWorkspaceLock, releaseWorkspaceLock, workspaceLockName, type WorkspaceLockHandle } from "./workspace-lock.js";
import type { Workspace } from "./workspace.js";

export interface CodeToolOptions {
  workspace: Workspace;
  /** Simulated latency of reads, so a person can follow along. */
  latencyMs: number;
}

/** Writes need the workspace lock; a tool call without it is refused rather than racing another run. */
function requireLock(ctx: ToolContext): WorkspaceLockHandle {
  return ctx.resource<WorkspaceLockHandle>(workspaceLockName);
}

/**
 * Compensation of a paused run runs while the lock is released for the pause: take it for the
 * undo, so no other run edits the workspace meanwhile.
 */
function withLock<T>(workspace: Workspace, ctx: CompensationContext, undo: () => T): T {
  if (ctx.resource<WorkspaceLockHandle>(workspaceLockName)) return undo();
  acquireWorkspaceLock(workspace, ctx.runId);
  try {
    return undo();
  } finally {
    releaseWorkspaceLock(workspace, ctx.runId);
  }
}

interface TestReport {
  passed: number;
  failed: number;
  total: number;
  failures: string[];
  output: string;
}

/** Reads `node --test --test-reporter=tap` output: the counts, the failing tests, and the lines worth showing. */
function testReport(finished: CommandResult): TestReport {
  const { stdout, stderr } = finished;
  const count = (label: string) => Number(new RegExp(`^# ${label} (\\d+)$`, "m").exec(stdout)?.[1] ?? 0);
  const total = count("tests");
  if (finished.exitCode !== 0 && total === 0) throw new Error(`node --test failed to run: ${stderr.trim() || `exit ${finished.exitCode ?? finished.signal}`}`);
  const failures = [...stdout.matchAll(/^\s*not ok \d+ - (.+)$/gm)].map((m) => m[1].trim());
  const lines = stdout.split("\n").filter((line) => /^\s*(not ok|ok|# (tests|pass|fail))\b/.test(line) || /^\s+(expected|actual): \S/.test(line));
  return { passed: count("pass"), failed: count("fail"), total, failures, output: lines.join("\n").slice(-2_000) };
}

export function codeTools({ workspace, latencyMs }: CodeToolOptions): AnyTool[] {
  const listFiles = tool({
    name: "list_files",
    description: "List the files of the workspace (or of one folder in it) with their sizes.",
    input: z.object({ dir: z.string().optional() }),
    idempotent: true,
    abortable: true,
    async execute({ dir }, { signal }) {
      await delay(latencyMs, signal);
      const files = workspace.list(dir ?? ".");
      return { files: files.map((f) => ({ ...f })), count: files.length };
    },
  });

  const readFile = tool({
    name: "read_file",
    description: "Read one file of the workspace.",
    input: z.object({ path: z.string().min(1) }),
    idempotent: true,
    abortable: true,
    async execute({ path }, { signal }) {
      await delay(latencyMs, signal);
      const content = workspace.read(path);
      return { path, content, lines: content.split("\n").length };
    },
  });

  const writeDraft = tool({
    name: "write_draft",
    description: "Write the new content of a file as a draft copy (in .tether-drafts/). Nothing in the workspace changes until apply_draft.",
    input: z.object({ path: z.string().min(1), content: z.string() }),
    idempotent: true,
    execute({ path, content }, ctx) {
      requireLock(ctx);
      const { draft, sha256 } = workspace.writeDraft(path, content);
      return { path, draft, sha256, bytes: Buffer.byteLength(content) };
    },
    compensate({ path }, result, ctx) {
      withLock(workspace, ctx, () => workspace.discardDraft(path, result.sha256));
    },
  });

  const applyDraft = tool({
    name: "apply_draft",
    description: "Replace a workspace file with its draft copy. Cancelling the run puts the original back.",
    input: z.object({ path: z.string().min(1) }),
    // The apply writes a receipt first, so a retry with the same key finishes the same edit.
    idempotent: true,
    execute({ path }, ctx) {
      requireLock(ctx);
      return workspace.apply(path, ctx.idempotencyKey);
    },
    compensate(_input, edit, ctx) {
      withLock(workspace, ctx, () => workspace.revert(edit));
    },
    revalidate(_input, edit) {
      return workspace.isApplied(edit) ? true : `${edit.path} was changed outside the run since it applied its draft`;
    },
  });

  const testTargets = (files: string[] | undefined): string[] =>
    files?.length ? files.map((f) => workspace.relative(workspace.resolve(f))) : workspace.list().map((f) => f.path).filter((p) => /^test\/.*\.test\.(js|mjs)$/.test(p));

  // A command tool: a pause or cancel stops the test run's whole process group, and its output streams to the journal.
  const runTests = commandTool({
    name: "run_tests",
    description: "Run the workspace's test suite (node --test on test/**/*.test.js) and report passes and failures.",
    input: z.object({ files: z.array(z.string()).optional() }),
    idempotent: true,
    timeoutMs: 90_000,
    maxOutputBytes: 4 * 1024 * 1024,
    command({ files }) {
      const targets = testTargets(files);
      if (!targets.length) throw new Error("no test files found (test/**/*.test.js); write one first, or pass `files`");
      const env = { ...process.env };
      delete env.NODE_OPTIONS;
      delete env.NODE_TEST_CONTEXT;
      return { command: process.execPath, args: ["--test", "--test-reporter=tap", ...targets], cwd: workspace.root, env };
    },
    result: (finished, { files }) => ({ ...testReport(finished), files: testTargets(files) }),
  });

  return [listFiles, readFile, writeDraft, applyDraft, runTests];
}
