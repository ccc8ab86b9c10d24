import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TetherError } from "../../src/engine/errors.js";
import { resource, type ResourceDefinition } from "../../src/engine/resource.js";
import { lockFileName, type Workspace } from "./workspace.js";

export interface LockContent {
  runId: string;
  pid: number;
  acquiredAt: string;
}

export interface WorkspaceLockHandle {
  path: string;
  runId: string;
}

/** The workspace is locked by another run that is still alive. */
export class WorkspaceLockedError extends TetherError {
  constructor(workspace: string, holder: LockContent) {
    super("tool_unavailable", `workspace ${workspace} is locked by run ${holder.runId} (pid ${holder.pid}, since ${holder.acquiredAt})`, {
      workspace,
      heldBy: holder.runId,
      pid: holder.pid,
    });
    this.name = "WorkspaceLockedError";
  }
}

export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function readLock(path: string): LockContent | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as LockContent;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    // A lock file cut short by a crash: treat it as held by nobody alive.
    return { runId: "(unreadable)", pid: -1, acquiredAt: "" };
  }
}

/**
 * Takes `<workspace>/.tether.lock` for a run. A lock left by the same run (a crash, a pause whose
 * release never happened) or by a process that no longer exists is stale and taken over; a lock
 * of another run whose process is alive is refused.
 */
export function acquireWorkspaceLock(workspace: Workspace, runId: string): WorkspaceLockHandle {
  const path = join(workspace.root, lockFileName);
  const content = (): string => `${JSON.stringify({ runId, pid: process.pid, acquiredAt: new Date().toISOString() } satisfies LockContent)}\n`;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      writeFileSync(path, content(), { flag: "wx" });
      return { path, runId };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = readLock(path);
    if (!holder) continue;
    if (holder.runId !== runId && processAlive(holder.pid)) throw new WorkspaceLockedError(workspace.root, holder);
    // Stale: replace it atomically, then check we are the one who won a race with another taker.
    const temporary = `${path}.${process.pid}.${runId}.tmp`;
    writeFileSync(temporary, content());
    renameSync(temporary, path);
    if (readLock(path)?.runId === runId) return { path, runId };
  }
  throw new Error(`could not take the lock ${path}: it kept changing`);
}

/** Removes the lock if this run holds it, and the run's apply receipts with it. */
export function releaseWorkspaceLock(workspace: Workspace, runId: string): void {
  const path = join(workspace.root, lockFileName);
  workspace.dropReceipts(runId);
  if (readLock(path)?.runId === runId) rmSync(path, { force: true });
}

export const workspaceLockName = "workspace-lock";

/** The workspace lock as a run resource: released while the run is paused, taken again on resume. */
export function workspaceLock(workspace: Workspace, template: string | undefined): ResourceDefinition<WorkspaceLockHandle> {
  return resource<WorkspaceLockHandle>({
    name: workspaceLockName,
    releaseOnPause: true,
    acquire({ runId }) {
      workspace.ensureSeeded(template);
      return acquireWorkspaceLock(workspace, runId);
    },
    record: (handle) => ({ path: handle.path, runId: handle.runId, pid: process.pid }),
    release(_handle, record) {
      releaseWorkspaceLock(workspace, String((record as { runId: string }).runId));
    },
    revalidate(record) {
      const runId = String((record as { runId: string }).runId);
      const holder = readLock(join(workspace.root, lockFileName));
      if (holder && holder.runId !== runId && processAlive(holder.pid)) return `the workspace is now locked by run ${holder.runId}`;
      return true;
    },
  });
}
