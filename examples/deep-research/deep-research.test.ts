import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import { completedCalls, exampleHarness, startedInputs, type ExampleHarness } from "../shared/test-harness.js";
import { deepResearchAgent, defaultQuestion } from "./agent.js";
import { Corpus } from "./corpus.js";
import { parseDraft } from "./drafts.js";
import { exampleAsset } from "../shared/package-root.js";
import type { JournalEntry, RunRecord } from "../../src/engine/store.js";

let harness: ExampleHarness;
afterEach(async () => harness?.dispose());

/** Waits for the run to end, expects it completed, and reads its journal. */
async function completedRun(runId: string): Promise<{ done: RunRecord; journal: JournalEntry[] }> {
  const done = await harness.runtime.waitFor(runId, ["completed", "failed", "paused"]);
  expect(done.status, JSON.stringify(done.statusReason ?? done.error)).toBe("completed");
  return { done, journal: await harness.runtime.journal(runId, { limit: 10_000 }) };
}

function setup(): { dataDir: string } {
  harness = exampleHarness((dataDir) => [deepResearchAgent({ dataDir, tokensPerSecond: 4000 })]);
  return { dataDir: join(harness.dir, "data") };
}

describe("deep-research corpus", () => {
  it("ranks the documents about the query's terms first", () => {
    const corpus = new Corpus(exampleAsset("deep-research", "corpus"));
    expect(corpus.documents.length).toBeGreaterThanOrEqual(8);
    expect(corpus.search("saga compensating actions")[0].id).toBe("saga-pattern");
    expect(corpus.search("idempotency key hidden field")[0].id).toBe("idempotency-keys");
    expect(corpus.get("corpus://pause-and-resume")?.title).toBe("Pausing long-running agents safely");
    expect(corpus.get("corpus://pause-and-resume")?.text).not.toContain("<p>");
  });
});

describe("deep-research agent", () => {
  it("plans, searches, reads, drafts and publishes a cited report", async () => {
    const { dataDir } = setup();
    const run = await harness.runtime.start("deep-research", defaultQuestion);
    const { done, journal } = await completedRun(run.id);
    expect(startedInputs(journal, "search")).toHaveLength(2);
    expect(completedCalls(journal, "fetch").length).toBeGreaterThanOrEqual(3);
    expect(completedCalls(journal, "write_draft")).toHaveLength(1);
    expect(completedCalls(journal, "publish")).toHaveLength(1);

    const draft = parseDraft(readFileSync(join(dataDir, "drafts", `${run.id}.md`), "utf8"));
    expect(draft.header.status).toBe("published");
    expect(draft.body).toMatch(/## Sources\n\n\[1\] .+ \(corpus:\/\/[a-z-]+\)/);
    expect(existsSync(join(dataDir, "published", `${run.id}.md`))).toBe(true);
    expect(String(done.output)).toContain(`published/${run.id}.md`);
  });

  it("a question the corpus does not cover: widens the search once, then reads, drafts and publishes", async () => {
    const { dataDir } = setup();
    const run = await harness.runtime.start("deep-research", "What is the capital of France?");
    const { journal } = await completedRun(run.id);
    expect(startedInputs(journal, "search")).toEqual([
      { query: "capital france", limit: 5 },
      { query: "pause resume cancel compensation", limit: 5 },
    ]);
    expect(completedCalls(journal, "fetch").length).toBeGreaterThanOrEqual(2);
    expect(completedCalls(journal, "publish")).toHaveLength(1);
    expect(readFileSync(join(dataDir, "drafts", `${run.id}.md`), "utf8")).toMatch(/\[1\] .+ \(corpus:\/\/[a-z-]+\)/);
    const said = (await harness.runtime.state(run.id)).messages.filter((m) => m.role === "assistant").map((m) => JSON.stringify(m.content));
    expect(said[1]).toContain('The corpus has nothing on \\"capital france\\". It is about running agents durably');
  });

  it("a prompt too short to search, over a corpus with nothing in it: says so and writes no report, never repeating a call", async () => {
    const emptyRoot = mkdtempSync(join(tmpdir(), "tether-empty-corpus-"));
    onTestFinished(() => rmSync(emptyRoot, { recursive: true, force: true }));
    const empty = join(emptyRoot, "corpus");
    mkdirSync(empty);
    harness = exampleHarness((dataDir) => [deepResearchAgent({ dataDir, tokensPerSecond: 4000, corpusDir: empty })]);
    const run = await harness.runtime.start("deep-research", "q 1");
    const { done, journal } = await completedRun(run.id);
    expect(startedInputs(journal, "search")).toEqual([
      { query: "q 1", limit: 5 },
      { query: "pause resume cancel compensation", limit: 5 },
    ]);
    expect(journal.filter((e) => e.type === "call.failed")).toEqual([]);
    expect(completedCalls(journal, "write_draft")).toHaveLength(0);
    expect(existsSync(join(harness.dir, "data", "drafts", `${run.id}.md`))).toBe(false);
    expect(String(done.output)).toContain('The corpus has nothing on "q 1" or "pause resume cancel compensation", so there is nothing to cite and I wrote no report.');
  });

  it("cancelled after it wrote its draft: the draft is discarded and nothing stays published", async () => {
    const { dataDir } = setup();
    const run = await harness.runtime.start("deep-research", { question: "Why do checkpoints get expensive as a run grows?" });
    await harness.journalUntil(run.id, (journal) => completedCalls(journal, "write_draft").length === 1);
    await harness.runtime.cancel(run.id, { actor: "test", reason: "changed my mind" });
    const cancelled = await harness.runtime.waitFor(run.id, ["cancelled"]);

    const draftPath = join(dataDir, "drafts", `${run.id}.md`);
    const draft = parseDraft(readFileSync(draftPath, "utf8"));
    expect(draft.header.status).toBe("discarded");
    expect(draft.body).toContain("## Findings");
    expect(existsSync(join(dataDir, "published", `${run.id}.md`))).toBe(false);
    expect(cancelled.report?.compensated.map((c) => c.tool)).toContain("write_draft");
    expect(cancelled.report?.failed).toEqual([]);
  });

  it("takes a person's steering note while paused into the report", async () => {
    const { dataDir } = setup();
    const run = await harness.runtime.start("deep-research", defaultQuestion);
    await harness.journalUntil(run.id, (journal) => completedCalls(journal, "search").length === 1);
    await harness.runtime.pause(run.id, { actor: "reviewer" });
    await harness.runtime.waitFor(run.id, ["paused"]);
    await harness.runtime.resume(run.id, { actor: "reviewer", message: "focus on idempotency keys for retries" });
    const done = await harness.runtime.waitFor(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const draft = parseDraft(readFileSync(join(dataDir, "drafts", `${run.id}.md`), "utf8"));
    expect(draft.body).toContain('Reviewer notes taken into account: "focus on idempotency keys for retries"');
    const journal = await harness.runtime.journal(run.id, { limit: 10_000 });
    expect(JSON.stringify(startedInputs(journal, "search")[1])).toContain("idempotency");
  });

  it("cancelled after publishing: the publication is taken down first, then the draft discarded", async () => {
    harness = exampleHarness((dataDir) => [deepResearchAgent({ dataDir, tokensPerSecond: 300 })]);
    const dataDir = join(harness.dir, "data");
    const run = await harness.runtime.start("deep-research", defaultQuestion);
    await harness.journalUntil(run.id, (journal) => completedCalls(journal, "publish").length === 1, 30_000);
    expect(existsSync(join(dataDir, "published", `${run.id}.md`))).toBe(true);
    await harness.runtime.cancel(run.id, { actor: "test" });
    const cancelled = await harness.runtime.waitFor(run.id, ["cancelled"]);
    expect(cancelled.report?.compensated.map((c) => c.tool)).toEqual(["publish", "write_draft"]);
    expect(existsSync(join(dataDir, "published", `${run.id}.md`))).toBe(false);
    expect(parseDraft(readFileSync(join(dataDir, "drafts", `${run.id}.md`), "utf8")).header.status).toBe("discarded");
  }, 40_000);

  it("refuses to resume when the draft was edited while paused (stale), and a cancel still discards it", async () => {
    const { dataDir } = setup();
    const run = await harness.runtime.start("deep-research", defaultQuestion);
    await harness.journalUntil(run.id, (journal) => completedCalls(journal, "write_draft").length === 1);
    await harness.runtime.pause(run.id, { actor: "test" });
    const paused = await harness.runtime.waitFor(run.id, ["paused", "completed"]);
    if (paused.status !== "paused") return expect.fail("the run finished before the pause took effect");
    const draftPath = join(dataDir, "drafts", `${run.id}.md`);
    writeFileSync(draftPath, `${readFileSync(draftPath, "utf8")}\nA note a person added by hand.\n`);
    await expect(harness.runtime.resume(run.id, { actor: "test" })).rejects.toMatchObject({ code: "stale_snapshot" });
    await harness.runtime.cancel(run.id, { actor: "test" });
    await harness.runtime.waitFor(run.id, ["cancelled"]);
    const draft = parseDraft(readFileSync(draftPath, "utf8"));
    expect(draft.header.status).toBe("discarded");
    expect(draft.body).toContain("A note a person added by hand.");
  });
});
