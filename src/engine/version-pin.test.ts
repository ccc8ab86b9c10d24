import { afterEach, describe, expect, it } from "vitest";
import { ModelRegistry } from "../models/model-registry.js";
import { effectTool, harness, Ledger, sequenceAgent, sequentialIds, TestClock, type Harness } from "../testing/index.js";
import type { AgentDefinition } from "./agent.js";
import { VersionMismatchError } from "./errors.js";
import { Runtime } from "./runtime.js";
import { versionMatches } from "./version-pin.js";

let h: Harness | undefined;
const others: Runtime[] = [];
afterEach(async () => {
  for (const r of others.splice(0)) await r.close();
  await h?.cleanup();
  h = undefined;
});

const more = { budgets: { maxSteps: 10 } };

function publisher(ledger: Ledger, extra: Partial<AgentDefinition> = {}): AgentDefinition {
  const agent = sequenceAgent({
    name: "publisher",
    tools: [effectTool({ name: "publish", ledger }), effectTool({ name: "note", ledger })],
    steps: [
      { tool: "publish", input: { id: "draft-1" } },
      { tool: "note", input: { id: "n" } },
    ],
    budgets: { maxSteps: 1 },
  });
  return { ...agent, ...extra } as AgentDefinition;
}

/** A run of version 1 paused after its first step, and a second process on the same store whose code is `later`. */
async function pausedUnderV1(later: (ledger: Ledger) => AgentDefinition | undefined, options: { worker?: boolean; clock?: TestClock } = {}) {
  const ledger = new Ledger();
  const clock = options.clock ?? new TestClock();
  h = harness([publisher(ledger)], { clock });
  const run = await h.runtime.start("publisher", null);
  const paused = await h.runtime.waitFor(run.id, ["paused", "completed", "failed"]);
  expect(paused).toMatchObject({ status: "paused", step: 1, agentVersion: "1" });
  await h.runtime.settled(run.id);
  await h.runtime.close();
  const agent = later(ledger);
  const next = new Runtime({
    store: h.sqlite.open(),
    agents: agent ? [agent] : [],
    resolveModel: new ModelRegistry().resolver,
    ids: sequentialIds("n"),
    workerId: "worker-n",
    clock,
    worker: options.worker ?? true,
    workerPollMs: 10,
  });
  others.push(next);
  return { run: paused, rt: next, ledger, clock };
}

describe("version patterns", () => {
  it("match exact versions and x parts", () => {
    expect(versionMatches("1", "1")).toBe(true);
    expect(versionMatches("1.x", "1")).toBe(true);
    expect(versionMatches("1.x", "1.4.2")).toBe(true);
    expect(versionMatches("1.2.x", "1.2.9")).toBe(true);
    expect(versionMatches("1.2.x", "1.3.0")).toBe(false);
    expect(versionMatches("1", "1.0")).toBe(false);
    expect(versionMatches("2.x", "1.9")).toBe(false);
  });
});

describe("runs pinned to their agent's version", () => {
  it("refuses to resume a version 1 run under version 2 with version_mismatch, naming both versions and the fix; nothing runs", async () => {
    const { run, rt, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { version: "2" }));
    const error = await rt.resume(run.id, { ...more, actor: "ann" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VersionMismatchError);
    expect(error).toMatchObject({ code: "version_mismatch", details: { runId: run.id, agent: "publisher", runVersion: "1", currentVersion: "2" } });
    const message = (error as Error).message;
    expect(message).toContain("version 1");
    expect(message).toContain("version 2");
    expect(message).toContain("compatibleWith");
    expect(message).toContain("--current-version");
    expect(await rt.get(run.id)).toMatchObject({ status: "paused", step: 1 });
    expect((await rt.commands(run.id)).map((c) => [c.type, c.actor, c.outcome])).toEqual([["resume", "ann", "refused: version_mismatch"]]);
    expect(ledger.executionsOf("note")).toBe(0);
  });

  it("resumes it when version 2 declares itself compatible with 1.x", async () => {
    const { run, rt, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { version: "2.0.0", compatibleWith: ["1.x"] }));
    await rt.resume(run.id, more);
    expect(await rt.waitFor(run.id, ["completed", "failed", "paused"])).toMatchObject({ status: "completed", agentVersion: "1" });
    expect(ledger.executionsOf("note")).toBe(1);
  });

  it("forks it onto version 2 only when asked to (currentVersion), and the fork runs", async () => {
    const { run, rt, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { version: "2" }));
    await expect(rt.fork(run.id, { fromStep: 1 })).rejects.toMatchObject({ code: "version_mismatch" });
    const fork = await rt.fork(run.id, { fromStep: 1, currentVersion: true, actor: "ann" });
    expect(fork).toMatchObject({ agentVersion: "2", forkedFrom: { runId: run.id, step: 1 } });
    expect((await rt.journal(fork.id))[0]).toMatchObject({ type: "run.created", data: { version: "2", fromVersion: "1", forkedFrom: run.id } });
    // The fork keeps the source's budgets (one step): it pauses for them, and version 2 resumes it.
    expect(await rt.waitFor(fork.id, ["completed", "failed", "paused"])).toMatchObject({ status: "paused", statusReason: expect.stringMatching(/^budget_steps/) });
    await rt.resume(fork.id, more);
    expect(await rt.waitFor(fork.id, ["completed", "failed", "paused"])).toMatchObject({ status: "completed" });
    expect(ledger.executionsOf("note")).toBe(1);
    expect(ledger.executionsOf("publish")).toBe(1);
  });

  it("a resume from a process without the agent's code is refused by the version 2 worker that claims it: paused with version_mismatch before any call", async () => {
    const { run, rt: worker, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { version: "2" }));
    const control = new Runtime({ store: h!.sqlite.open(), agents: [], resolveModel: new ModelRegistry().resolver, ids: sequentialIds("c"), worker: false });
    others.push(control);
    expect(await control.resume(run.id, { ...more, actor: "cli" })).toMatchObject({ status: "running", uncheckedResume: { actor: "cli" } });
    worker.startWorker();
    const paused = await worker.waitFor(run.id, (r) => r.status === "paused" && r.version > run.version + 1);
    expect(paused.statusReason).toMatch(/^version_mismatch: started by publisher version 1, this worker has version 2/);
    expect(paused).toMatchObject({ lease: null, uncheckedResume: null });
    expect(ledger.executionsOf("note")).toBe(0);
    const journal = await worker.journal(run.id);
    expect(journal.slice(-2).map((e) => [e.type, e.data.from, e.data.to])).toEqual([
      ["status", "running", "pausing"],
      ["status", "pausing", "paused"],
    ]);
    expect(journal.some((e) => e.type === "call.started" && e.seq > run.journalSeq)).toBe(false);
  });
});

describe("the stale check of a resume from a process without the agent's code", () => {
  it("is run by the worker that claims the run: stale, with no onStale, it ends paused and no call runs", async () => {
    const clock = new TestClock();
    const { run, rt: worker, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { staleAfterMs: 60_000 }), { clock });
    const control = new Runtime({ store: h!.sqlite.open(), agents: [], resolveModel: new ModelRegistry().resolver, ids: sequentialIds("c"), worker: false, clock });
    others.push(control);
    clock.advance(120_000);
    expect(await control.resume(run.id, more)).toMatchObject({ status: "running" });
    worker.startWorker();
    const paused = await worker.waitFor(run.id, (r) => r.status === "paused" && r.version > run.version + 1);
    expect(paused.statusReason).toMatch(/^stale_snapshot: the snapshot is 120 s old/);
    expect(ledger.executionsOf("note")).toBe(0);
    // Forced from anywhere, it runs.
    await control.resume(run.id, { ...more, force: true });
    expect(await worker.waitFor(run.id, ["completed", "failed"])).toMatchObject({ status: "completed" });
    expect(ledger.executionsOf("note")).toBe(1);
  });

  it("runs the agent's onStale there, journaled with its reasons and what it changed, then executes the refreshed state", async () => {
    const clock = new TestClock();
    const seen: string[][] = [];
    const { run, rt: worker } = await pausedUnderV1(
      (ledger) =>
        publisher(ledger, {
          staleAfterMs: 60_000,
          onStale: (state, reasons) => {
            seen.push(reasons);
            state.vars = { ...state.vars, refreshed: true };
            return state;
          },
        }),
      { clock },
    );
    const control = new Runtime({ store: h!.sqlite.open(), agents: [], resolveModel: new ModelRegistry().resolver, ids: sequentialIds("c"), worker: false, clock });
    others.push(control);
    clock.advance(120_000);
    await control.resume(run.id, more);
    worker.startWorker();
    expect(await worker.waitFor(run.id, ["completed", "failed", "paused"])).toMatchObject({ status: "completed", uncheckedResume: null });
    expect(seen).toHaveLength(1);
    const patched = (await worker.journal(run.id)).filter((e) => e.type === "state.patched");
    expect(patched).toHaveLength(1);
    expect(patched[0].data).toMatchObject({ actor: "onStale", changed: { vars: ["refreshed"], messages: 0 }, checkedBy: "worker-n" });
    expect(String((patched[0].data.reasons as string[])[0])).toContain("120 s old");
    expect((await worker.state(run.id)).vars).toMatchObject({ refreshed: true });
  });

  it("a fresh snapshot passes the worker's check and runs", async () => {
    const { run, rt: worker, ledger } = await pausedUnderV1((ledger) => publisher(ledger, { staleAfterMs: 60_000 }));
    const control = new Runtime({ store: h!.sqlite.open(), agents: [], resolveModel: new ModelRegistry().resolver, ids: sequentialIds("c"), worker: false });
    others.push(control);
    await control.resume(run.id, more);
    worker.startWorker();
    expect(await worker.waitFor(run.id, ["completed", "failed", "paused"])).toMatchObject({ status: "completed", uncheckedResume: null });
    expect(ledger.executionsOf("note")).toBe(1);
  });
});
