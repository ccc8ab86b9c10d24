import type { Json } from "../../src/engine/json.js";
import type { SimulatedScript, SimulatedTurn } from "../../src/models/simulated-model.js";
import { allSteering, field, newSteering, taskOf, text, toolExchanges, type ToolExchange } from "../shared/conversation.js";
import { sentences, terms } from "./corpus.js";

interface Hit {
  url: string;
  title: string;
  snippet: string;
}

interface Source {
  url: string;
  title: string;
  text: string;
}

const generic = new Set(["agent", "agents", "ai", "long", "running", "handle", "work", "make", "use", "good", "best", "way"]);

function hitsOf(exchange: ToolExchange): Hit[] {
  const hits = field(exchange.output, "hits");
  if (!Array.isArray(hits)) return [];
  return hits.map((hit) => ({ url: text(field(hit, "url")), title: text(field(hit, "title")), snippet: text(field(hit, "snippet")) }));
}

function sourceOf(exchange: ToolExchange): Source {
  return { url: text(field(exchange.output, "url")), title: text(field(exchange.output, "title")), text: text(field(exchange.output, "text")) };
}

function firstQuery(question: string): string {
  return [...new Set(terms(question).filter((t) => !generic.has(t)))].slice(0, 6).join(" ") || question;
}

/** The concepts this simulated researcher recognises in a text, by word prefix. */
const concepts: [name: string, prefix: string][] = [
  ["compensation", "compensat"],
  ["idempotency", "idempoten"],
  ["journal", "journal"],
  ["checkpoint", "checkpoint"],
  ["snapshot", "snapshot"],
  ["retry", "retr"],
  ["crash", "crash"],
  ["recovery", "recover"],
  ["lock", "lock"],
  ["browser", "browser"],
  ["uncertain", "uncertain"],
  ["budget", "budget"],
  ["pause", "paus"],
  ["resume", "resum"],
  ["saga", "saga"],
  ["stale", "stale"],
];

/** Concepts most of the sources discuss that the question did not ask about: where to dig next. */
function themes(question: string, sources: readonly Source[], count: number): string[] {
  const mentions = (text: string, prefix: string) => terms(text).filter((t) => t.startsWith(prefix)).length;
  return concepts
    .filter(([, prefix]) => mentions(question, prefix) === 0)
    .map(([name, prefix]) => ({
      name,
      sources: sources.filter((s) => mentions(s.text, prefix) > 0).length,
      uses: sources.reduce((sum, s) => sum + mentions(s.text, prefix), 0),
    }))
    .filter((c) => c.sources > 0)
    .sort((a, b) => b.sources - a.sources || b.uses - a.uses || a.name.localeCompare(b.name))
    .slice(0, count)
    .map((c) => c.name);
}

/**
 * What the shipped corpus is about, searched when the question's own words find nothing in it
 * (a short or off-topic prompt): a researcher widens the search rather than repeating it.
 */
const broadQuery = "pause resume cancel compensation";

function followUpQuery(question: string, sources: readonly Source[], notes: readonly string[]): string {
  const steer = notes.flatMap((note) => terms(note).filter((t) => !generic.has(t))).slice(0, 4);
  return [...new Set([...steer, ...themes(question, sources, 3), ...terms(firstQuery(question)).slice(0, 1)])].join(" ") || broadQuery;
}

/** The sentences of a source that say the most about the question, in their original order. */
function keySentences(source: Source, focus: ReadonlySet<string>, count: number): string[] {
  const all = sentences(source.text);
  const ranked = all
    .map((sentence, index) => ({ sentence, index, score: terms(sentence).filter((t) => focus.has(t)).length }))
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, count)
    .sort((a, b) => a.index - b.index);
  return ranked.map((r) => r.sentence);
}

function titleFor(question: string): string {
  const trimmed = question.trim().replace(/[?.!]+$/, "");
  return `Research note: ${trimmed.charAt(0).toUpperCase()}${trimmed.slice(1)}`;
}

function report(question: string, sources: readonly Source[], notes: readonly string[]): string {
  const focus = new Set([...terms(question), ...notes.flatMap((n) => terms(n))]);
  const findings = sources.map((source, i) => `### ${i + 1}. ${source.title}\n\n${keySentences(source, focus, 2).join(" ")} [${i + 1}]`);
  const recurring = themes(question, sources, 5).join(", ");
  return [
    `# ${titleFor(question)}`,
    "",
    `_Question:_ ${question.trim()}`,
    "",
    "## Summary",
    "",
    `Across ${sources.length} sources the answer converges: record every side effect as it happens, give each one a compensation that can run twice without harm, ` +
      `and undo them newest first when the run is cancelled. Calls that were in flight are retried only when they are idempotent or checkable; ` +
      `everything else is reported as uncertain for a person to decide. Recurring themes: ${recurring}.`,
    ...(notes.length ? ["", `Reviewer notes taken into account: ${notes.map((n) => `"${n}"`).join("; ")}.`] : []),
    "",
    "## Findings",
    "",
    findings.join("\n\n"),
    "",
    "## Sources",
    "",
    ...sources.map((source, i) => `[${i + 1}] ${source.title} (${source.url})`),
    "",
  ].join("\n");
}

function bullets(hits: readonly Hit[]): string {
  return hits.map((hit) => `- ${hit.title}: "${hit.snippet}"`).join("\n");
}

function acknowledge(notes: readonly string[]): string {
  return notes.length ? `Noted: ${notes.map((n) => `"${n}"`).join("; ")}. I will take that into account.\n\n` : "";
}

/**
 * The deep-research trace: plan, search, read the best hits, search again for what the first
 * sources raised, read those, write the report draft, publish it, answer. Decided from the
 * conversation alone, so it continues correctly after a pause, a steering note or a crash.
 */
export const deepResearchScript: SimulatedScript = ({ request }): SimulatedTurn => {
  const messages = request.messages;
  const question = taskOf(messages);
  const notes = allSteering(messages);
  const said = acknowledge(newSteering(messages));
  const done = toolExchanges(messages).filter((e) => e.done);
  const searches = done.filter((e) => e.toolName === "search" && e.ok);
  const attempted = done.filter((e) => e.toolName === "fetch");
  const fetched = attempted.filter((e) => e.ok);
  const fetchedUrls = new Set(attempted.map((e) => text(field(e.input, "url"))));
  const sources = fetched.map(sourceOf);

  if (searches.length === 0) {
    const query = firstQuery(question);
    return {
      text:
        `${said}Plan:\n1. Search the corpus for the core of the question ("${query}").\n2. Read the most relevant sources in full.\n` +
        `3. Search again for the themes those sources raise, and read what is new.\n4. Write a report draft with citations.\n5. Publish the draft and summarise the answer.`,
      toolCalls: [{ toolName: "search", input: { query, limit: 5 } }],
    };
  }

  const lastSearch = searches[searches.length - 1];
  const readSinceLastSearch = attempted.some((e) => e.turnIndex > lastSearch.turnIndex);
  const unread = hitsOf(lastSearch).filter((hit) => !fetchedUrls.has(hit.url));
  if (!readSinceLastSearch && unread.length) {
    const toRead = unread.slice(0, searches.length === 1 ? 3 : 2);
    return {
      text:
        `${said}The search for "${text(field(lastSearch.output, "query"))}" returned ${hitsOf(lastSearch).length} hits. The most promising:\n${bullets(toRead)}\n\n` +
        `Reading ${toRead.length === 1 ? "it" : `these ${toRead.length}`} in full.`,
      toolCalls: toRead.map((hit) => ({ toolName: "fetch", input: { url: hit.url } })),
    };
  }

  if (sources.length === 0 && searches.every((search) => hitsOf(search).length === 0)) {
    const asked = searches.map((search) => `"${text(field(search.output, "query"))}"`);
    if (searches.length === 1) {
      return {
        text:
          `${said}The corpus has nothing on ${asked[0]}. It is about running agents durably, so I am searching it for what it does cover ` +
          `("${broadQuery}").`,
        toolCalls: [{ toolName: "search", input: { query: broadQuery, limit: 5 } }],
      };
    }
    return {
      text:
        `${said}The corpus has nothing on ${asked.join(" or ")}, so there is nothing to cite and I wrote no report. ` +
        `Ask about something it covers: pausing, resuming or cancelling agents, checkpoints, idempotency, compensation.`,
    };
  }

  if (searches.length < 2) {
    const query = followUpQuery(question, sources, notes);
    const titles = sources.map((s) => s.title).join("; ");
    return {
      text: sources.length
        ? `${said}So far: ${titles}. They agree on journaling effects and compensating them, but I want more on the failure cases. Searching for "${query}".`
        : `${said}None of the sources found could be read. Searching for "${query}" instead.`,
      toolCalls: [{ toolName: "search", input: { query, limit: 5 } }],
    };
  }

  const drafts = done.filter((e) => e.toolName === "write_draft" && e.ok);
  if (drafts.length === 0) {
    const content = report(question, sources, notes);
    return {
      text: `${said}I have ${sources.length} sources. Writing the report draft: a summary, one finding per source with its citation, and the source list.`,
      toolCalls: [{ toolName: "write_draft", input: { title: titleFor(question), content } }],
    };
  }

  const lastDraft = drafts[drafts.length - 1];
  const published = done.some((e) => e.toolName === "publish" && e.ok && e.turnIndex > lastDraft.turnIndex);
  if (!published) {
    return {
      text:
        `${said}Draft saved to ${text(field(lastDraft.output, "path"))} (revision ${String(field(lastDraft.output, "revision"))}). ` +
        `Checked it: every finding cites a source and every source is listed. Publishing it.`,
      toolCalls: [{ toolName: "publish", input: { note: `${sources.length} sources` } as Json }],
    };
  }

  const publication = done.filter((e) => e.toolName === "publish" && e.ok).pop();
  return {
    text:
      `${said}The report is published at ${text(field(publication?.output ?? null, "path"))}.\n\n` +
      `Short answer: make every side effect a journaled call with a compensation that is safe to repeat, undo them newest first on cancel, ` +
      `retry in-flight calls only when they are idempotent or checkable, and flag the rest as uncertain for a person. ` +
      `Sources: ${sources.map((s, i) => `[${i + 1}] ${s.title}`).join("; ")}.`,
  };
};
