import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, posix, relative, sep } from "node:path";

export const draftsFolder = ".tether-drafts";
export const lockFileName = ".tether.lock";
const receiptsFolder = ".receipts";

export function sha256(content: string | null): string | null {
  return content === null ? null : createHash("sha256").update(content).digest("hex");
}

/** What applying a draft changed, enough to put the file back as it was. */
export interface AppliedEdit {
  path: string;
  /** The file before the edit; null when the edit created it. */
  original: string | null;
  originalSha: string | null;
  appliedSha: string;
  /** Folders the edit created, deepest first, removed again when it is undone. */
  createdDirs: string[];
  linesChanged: number;
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

function writeAtomically(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content);
  renameSync(temporary, path);
}

/** Lines added plus lines removed (a longest-common-subsequence diff; the files are small). */
function linesChanged(before: string | null, after: string): number {
  const a = before === null ? [] : before.split("\n");
  const b = after.split("\n");
  const common: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  }
  return a.length + b.length - 2 * common[0][0];
}

function keyFileName(key: string): string {
  return `${key.replace(/[^a-zA-Z0-9_-]/g, "_")}.json`;
}

/**
 * A folder the code agent edits. Every edit goes through a draft copy in `.tether-drafts/`
 * first; applying a draft writes a receipt before it touches the file, so an apply interrupted
 * by a crash finishes the same way when retried with the same idempotency key.
 */
export class Workspace {
  constructor(readonly root: string) {}

  /** Creates the workspace from a template folder the first time. */
  ensureSeeded(template: string | undefined): void {
    if (existsSync(this.root)) return;
    if (!template) {
      mkdirSync(this.root, { recursive: true });
      return;
    }
    mkdirSync(dirname(this.root), { recursive: true });
    const staging = `${this.root}.${process.pid}.seeding`;
    cpSync(template, staging, { recursive: true });
    try {
      renameSync(staging, this.root);
    } catch (error) {
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(this.root)) throw error;
    }
  }

  /** A workspace-relative path, refused if it leaves the workspace or touches Tether's own files. */
  resolve(path: string): string {
    const normal = posix.normalize(path.replace(/\\/g, "/")).replace(/^\.\//, "");
    if (normal.startsWith("/") || normal === ".." || normal.startsWith("../")) throw new Error(`path ${path} is outside the workspace`);
    if (normal === lockFileName || normal === draftsFolder || normal.startsWith(`${draftsFolder}/`)) throw new Error(`path ${path} is reserved for Tether`);
    return join(this.root, ...normal.split("/"));
  }

  relative(absolute: string): string {
    return relative(this.root, absolute).split(sep).join("/");
  }

  /** Files of the workspace (without Tether's drafts and lock), sorted. */
  list(dir = "."): { path: string; bytes: number }[] {
    const start = dir === "." ? this.root : this.resolve(dir);
    const files: { path: string; bytes: number }[] = [];
    const walk = (folder: string) => {
      for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
        if (entry.name === draftsFolder || entry.name === lockFileName || entry.name === "node_modules" || entry.name === ".git") continue;
        const full = join(folder, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.isFile()) files.push({ path: this.relative(full), bytes: statSync(full).size });
      }
    };
    walk(start);
    return files;
  }

  read(path: string): string {
    const content = readOrNull(this.resolve(path));
    if (content === null) throw new Error(`${path} does not exist`);
    return content;
  }

  readOrNull(path: string): string | null {
    return readOrNull(this.resolve(path));
  }

  draftPath(path: string): string {
    this.resolve(path);
    return join(this.root, draftsFolder, ...posix.normalize(path).replace(/^\.\//, "").split("/"));
  }

  writeDraft(path: string, content: string): { draft: string; sha256: string } {
    const draft = this.draftPath(path);
    writeAtomically(draft, content);
    return { draft: this.relative(draft), sha256: sha256(content)! };
  }

  /** Removes the draft if it is still the one written (an applied draft is already gone). */
  discardDraft(path: string, expectedSha: string): void {
    const draft = this.draftPath(path);
    if (sha256(readOrNull(draft)) === expectedSha) rmSync(draft, { force: true });
    this.pruneDrafts(dirname(draft));
  }

  apply(path: string, key: string): AppliedEdit {
    const receiptPath = join(this.root, draftsFolder, receiptsFolder, keyFileName(key));
    const target = this.resolve(path);
    const draft = this.draftPath(path);
    let receipt = readOrNull(receiptPath);
    if (receipt === null) {
      const content = readOrNull(draft);
      if (content === null) throw new Error(`there is no draft of ${path}; write one with write_draft first`);
      const original = readOrNull(target);
      const createdDirs: string[] = [];
      for (let dir = dirname(target); !existsSync(dir); dir = dirname(dir)) createdDirs.push(this.relative(dir));
      const edit: AppliedEdit & { applied: string } = {
        path,
        original,
        originalSha: sha256(original),
        appliedSha: sha256(content)!,
        createdDirs,
        linesChanged: linesChanged(original, content),
        applied: content,
      };
      receipt = JSON.stringify(edit);
      writeAtomically(receiptPath, receipt);
    }
    const { applied, ...edit } = JSON.parse(receipt) as AppliedEdit & { applied: string };
    if (sha256(readOrNull(target)) !== edit.appliedSha) writeAtomically(target, applied);
    if (sha256(readOrNull(draft)) === edit.appliedSha) rmSync(draft, { force: true });
    this.pruneDrafts(dirname(draft));
    return edit;
  }

  /** Puts the file back as it was before the edit, unless someone changed it since. */
  revert(edit: AppliedEdit): "reverted" | "already_reverted" {
    const target = this.resolve(edit.path);
    const current = sha256(readOrNull(target));
    if (current === edit.originalSha) return "already_reverted";
    if (current !== edit.appliedSha) throw new Error(`${edit.path} was changed after the run applied its draft; leaving it for a person to merge`);
    if (edit.original === null) {
      rmSync(target, { force: true });
      for (const dir of edit.createdDirs) {
        const folder = join(this.root, ...dir.split("/"));
        if (existsSync(folder) && readdirSync(folder).length === 0) rmdirSync(folder);
      }
    } else writeAtomically(target, edit.original);
    return "reverted";
  }

  isApplied(edit: Pick<AppliedEdit, "path" | "appliedSha">): boolean {
    return sha256(readOrNull(this.resolve(edit.path))) === edit.appliedSha;
  }

  /** Drops a run's apply receipts: only an apply in flight needs one, and none is when the lock is released. */
  dropReceipts(runId: string): void {
    const folder = join(this.root, draftsFolder, receiptsFolder);
    if (!existsSync(folder)) return;
    const prefix = keyFileName(runId).replace(/\.json$/, "_");
    for (const name of readdirSync(folder)) if (name.startsWith(prefix)) rmSync(join(folder, name), { force: true });
    this.pruneDrafts(folder);
  }

  /** Removes empty folders from `from` up to and including `.tether-drafts`. */
  pruneDrafts(from: string): void {
    const top = join(this.root, draftsFolder);
    for (let dir = from; dir.startsWith(top); dir = dirname(dir)) {
      if (!existsSync(dir)) continue;
      if (readdirSync(dir).length > 0) return;
      rmdirSync(dir);
      if (dir === top) return;
    }
  }
}
