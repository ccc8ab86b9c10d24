import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export type DraftStatus = "live" | "published" | "discarded";

export interface DraftHeader {
  status: DraftStatus;
  run: string;
  title: string;
  revision: number;
  /** The idempotency key of the call that wrote this revision: a retry does not bump it. */
  key: string;
  updated: string;
}

export interface Draft {
  header: DraftHeader;
  body: string;
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function writeAtomically(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content);
  renameSync(temporary, path);
}

function render({ header, body }: Draft): string {
  const lines = [
    "---",
    `status: ${header.status}`,
    `run: ${header.run}`,
    `title: ${JSON.stringify(header.title)}`,
    `revision: ${header.revision}`,
    `key: ${header.key}`,
    `updated: ${header.updated}`,
    "---",
    "",
  ];
  return `${lines.join("\n")}${body}`;
}

/** Reads a draft file: a front-matter header (`status: live`, …) and the markdown body. */
export function parseDraft(content: string): Draft {
  const match = /^---\n([\s\S]*?)\n---\n\n?/.exec(content);
  if (!match) throw new Error("not a draft: the front-matter header is missing");
  const fields = new Map<string, string>();
  for (const line of match[1].split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  const status = fields.get("status");
  if (status !== "live" && status !== "published" && status !== "discarded") throw new Error(`unknown draft status "${status}"`);
  return {
    header: {
      status,
      run: fields.get("run") ?? "",
      title: JSON.parse(fields.get("title") ?? '""') as string,
      revision: Number(fields.get("revision") ?? 0),
      key: fields.get("key") ?? "",
      updated: fields.get("updated") ?? "",
    },
    body: content.slice(match[0].length),
  };
}

/**
 * Report drafts of the deep-research agent, one file per run under `<dataDir>/drafts`, and
 * the published copies under `<dataDir>/published`. A cancel never deletes a draft: it marks
 * it `discarded`, so a person can still read what the agent wrote.
 */
export class DraftStore {
  constructor(readonly dataDir: string) {}

  draftPath(runId: string): string {
    return join(this.dataDir, "drafts", `${runId}.md`);
  }

  publishedPath(runId: string): string {
    return join(this.dataDir, "published", `${runId}.md`);
  }

  read(runId: string): Draft | undefined {
    try {
      return parseDraft(readFileSync(this.draftPath(runId), "utf8"));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  write(runId: string, input: { title: string; body: string; key: string }): Draft {
    const previous = this.read(runId);
    const revision = previous?.header.key === input.key ? previous.header.revision : (previous?.header.revision ?? 0) + 1;
    const draft: Draft = {
      header: { status: "live", run: runId, title: input.title, revision, key: input.key, updated: new Date().toISOString() },
      body: input.body,
    };
    writeAtomically(this.draftPath(runId), render(draft));
    return draft;
  }

  /** Changes the status in the header; the body stays as it is. */
  setStatus(runId: string, status: DraftStatus): Draft | undefined {
    const draft = this.read(runId);
    if (!draft) return undefined;
    if (draft.header.status === status) return draft;
    const updated: Draft = { header: { ...draft.header, status, updated: new Date().toISOString() }, body: draft.body };
    writeAtomically(this.draftPath(runId), render(updated));
    return updated;
  }

  publish(runId: string): Draft {
    const draft = this.read(runId);
    if (!draft) throw new Error(`run ${runId} has no draft to publish`);
    if (draft.header.status === "discarded") throw new Error(`the draft of run ${runId} was discarded`);
    const published: Draft = { header: { ...draft.header, status: "published", updated: new Date().toISOString() }, body: draft.body };
    writeAtomically(this.publishedPath(runId), render(published));
    writeAtomically(this.draftPath(runId), render(published));
    return published;
  }

  /** Takes the published copy down; the draft is live again (and a cancel then discards it). */
  unpublish(runId: string): void {
    rmSync(this.publishedPath(runId), { force: true });
    const draft = this.read(runId);
    if (draft?.header.status === "published") this.setStatus(runId, "live");
  }
}
