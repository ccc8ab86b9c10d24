import { relative } from "node:path";
import { z } from "zod";
import { tool, type AnyTool } from "../../src/engine/tool.js";
import { delay } from "../shared/delay.js";
import { sentences, type Corpus } from "./corpus.js";
import { sha256, type DraftStore } from "./drafts.js";

export interface ResearchToolOptions {
  corpus: Corpus;
  drafts: DraftStore;
  /** Simulated network latency of `search` and `fetch`. */
  latencyMs: number;
}

/** search and fetch over the local corpus; write_draft and publish are effects a cancel undoes. */
export function researchTools({ corpus, drafts, latencyMs }: ResearchToolOptions): AnyTool[] {
  const search = tool({
    name: "search",
    description: "Search the research corpus. Returns the best-matching documents with a snippet each.",
    input: z.object({ query: z.string().min(1), limit: z.number().int().min(1).max(10).optional() }),
    idempotent: true,
    abortable: true,
    timeoutMs: 10_000,
    async execute({ query, limit }, { signal }) {
      await delay(latencyMs, signal);
      const hits = corpus.search(query, limit ?? 5);
      return { query, total: hits.length, hits: hits.map((h) => ({ ...h })) };
    },
  });

  const fetchDocument = tool({
    name: "fetch",
    description: "Fetch one document of the corpus by its url (corpus://<id>) and return its text.",
    input: z.object({ url: z.string().min(1) }),
    idempotent: true,
    abortable: true,
    timeoutMs: 10_000,
    async execute({ url }, { signal }) {
      await delay(latencyMs * 2, signal);
      const doc = corpus.get(url);
      if (!doc) throw new Error(`no document at ${url}; search first and use a url from the hits`);
      return { url: doc.url, title: doc.title, sentences: sentences(doc.text).length, text: doc.text };
    },
  });

  const writeDraft = tool({
    name: "write_draft",
    description: "Write (or revise) this run's report draft as markdown. The draft is live until published or discarded.",
    input: z.object({ title: z.string().min(1), content: z.string().min(1) }),
    idempotent: true,
    execute({ title, content }, { runId, idempotencyKey }) {
      const draft = drafts.write(runId, { title, body: content, key: idempotencyKey });
      return {
        run: runId,
        path: relative(drafts.dataDir, drafts.draftPath(runId)),
        status: draft.header.status,
        revision: draft.header.revision,
        bytes: Buffer.byteLength(content),
        sha256: sha256(content),
      };
    },
    compensate(_input, _result, { runId }) {
      drafts.setStatus(runId, "discarded");
    },
    revalidate(_input, result) {
      const draft = drafts.read(result.run);
      if (!draft) return `the draft ${result.path} is gone`;
      if (draft.header.status === "discarded") return `the draft ${result.path} was discarded`;
      if (draft.header.revision === result.revision && sha256(draft.body) !== result.sha256) return `the draft ${result.path} was edited outside the run`;
      return true;
    },
  });

  const publish = tool({
    name: "publish",
    description: "Publish this run's current draft as the final report.",
    input: z.object({ note: z.string().optional() }),
    idempotent: true,
    execute(_input, { runId }) {
      const draft = drafts.publish(runId);
      return { path: relative(drafts.dataDir, drafts.publishedPath(runId)), title: draft.header.title, revision: draft.header.revision };
    },
    compensate(_input, _result, { runId }) {
      drafts.unpublish(runId);
    },
  });

  return [search, fetchDocument, writeDraft, publish];
}
