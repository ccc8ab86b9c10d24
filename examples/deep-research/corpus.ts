import { readdirSync, readFileSync } from "node:fs";
import { extname, join } from "node:path";

export interface CorpusDocument {
  id: string;
  title: string;
  url: string;
  text: string;
}

export interface SearchHit {
  id: string;
  title: string;
  url: string;
  score: number;
  snippet: string;
}

const stopwords = new Set(
  "a an and are as at be by can do does for from has have how if in into is it its of on or should so that the their then there these this to was what when where which while who why will with without".split(" "),
);

/** Lower-cased word stems without stopwords: a crude but predictable analyser. */
export function terms(text: string): string[] {
  return (text.toLowerCase().match(/[a-z0-9]+/g) ?? [])
    .filter((word) => word.length > 1 && !stopwords.has(word))
    .map((word) => (word.length > 4 && word.endsWith("s") && !word.endsWith("ss") ? word.slice(0, -1) : word));
}

function decodeEntities(text: string): string {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&nbsp;/g, " ").replace(/&amp;/g, "&");
}

function parseDocument(file: string, raw: string): Omit<CorpusDocument, "id" | "url"> {
  if (extname(file) === ".html") {
    const title = decodeEntities(/<title>([\s\S]*?)<\/title>/i.exec(raw)?.[1]?.trim() ?? file);
    const body = /<body[^>]*>([\s\S]*)<\/body>/i.exec(raw)?.[1] ?? raw;
    const text = decodeEntities(
      body
        .replace(/<(script|style|h1)[^>]*>[\s\S]*?<\/\1>/gi, "")
        .replace(/<\/(p|h[1-6]|li|div|article|main)>/gi, "\n\n")
        .replace(/<[^>]+>/g, ""),
    );
    return { title, text: normaliseParagraphs(text) };
  }
  const heading = /^#\s+(.+)$/m.exec(raw);
  const text = raw.replace(/^#{1,6}\s+.*$/gm, "").replace(/[*_`]/g, "");
  return { title: heading?.[1]?.trim() ?? file, text: normaliseParagraphs(text) };
}

function normaliseParagraphs(text: string): string {
  return text
    .split(/\n\s*\n/)
    .map((paragraph) => paragraph.replace(/\s+/g, " ").trim())
    .filter(Boolean)
    .join("\n\n");
}

/** Sentences of a document's text, in order. */
export function sentences(text: string): string[] {
  return text.split(/(?<=[.!?])\s+/).map((s) => s.trim()).filter(Boolean);
}

/**
 * A folder of small markdown and HTML documents, searched with BM25 term scoring. Documents
 * are addressed as `corpus://<file name without extension>`.
 */
export class Corpus {
  readonly documents: CorpusDocument[];
  private readonly termCounts: Map<string, number>[];
  private readonly lengths: number[];
  private readonly documentFrequency = new Map<string, number>();
  private readonly averageLength: number;

  constructor(readonly folder: string) {
    this.documents = readdirSync(folder)
      .filter((file) => /\.(md|html)$/.test(file))
      .sort()
      .map((file) => {
        const id = file.replace(/\.(md|html)$/, "");
        return { id, url: `corpus://${id}`, ...parseDocument(file, readFileSync(join(folder, file), "utf8")) };
      });
    this.termCounts = this.documents.map((doc) => {
      const counts = new Map<string, number>();
      for (const term of [...terms(doc.title), ...terms(doc.title), ...terms(doc.text)]) counts.set(term, (counts.get(term) ?? 0) + 1);
      return counts;
    });
    this.lengths = this.termCounts.map((counts) => [...counts.values()].reduce((a, b) => a + b, 0));
    for (const counts of this.termCounts) for (const term of counts.keys()) this.documentFrequency.set(term, (this.documentFrequency.get(term) ?? 0) + 1);
    this.averageLength = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, this.lengths.length);
  }

  search(query: string, limit = 5): SearchHit[] {
    const queryTerms = [...new Set(terms(query))];
    const n = this.documents.length;
    const scored = this.documents.map((doc, i) => {
      let score = 0;
      for (const term of queryTerms) {
        const tf = this.termCounts[i].get(term) ?? 0;
        if (!tf) continue;
        const df = this.documentFrequency.get(term) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        score += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * this.lengths[i]) / this.averageLength));
      }
      return { doc, score };
    });
    return scored
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score || a.doc.id.localeCompare(b.doc.id))
      .slice(0, limit)
      .map(({ doc, score }) => ({ id: doc.id, title: doc.title, url: doc.url, score: Math.round(score * 1000) / 1000, snippet: bestSentence(doc.text, queryTerms) }));
  }

  get(idOrUrl: string): CorpusDocument | undefined {
    const id = idOrUrl.replace(/^corpus:\/\//, "");
    return this.documents.find((doc) => doc.id === id);
  }
}

function bestSentence(text: string, queryTerms: readonly string[]): string {
  let best = "";
  let bestHits = -1;
  for (const sentence of sentences(text)) {
    const words = new Set(terms(sentence));
    const hits = queryTerms.filter((t) => words.has(t)).length;
    if (hits > bestHits) {
      best = sentence;
      bestHits = hits;
    }
  }
  return best.length > 240 ? `${best.slice(0, 237)}...` : best;
}
