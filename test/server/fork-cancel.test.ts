import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/server/serve.js";
import { Ledger } from "../../src/testing/index.js";
import { forkyAgent } from "./fixture-agents.js";
import { makeEnv, type TestEnv } from "./helpers.js";
import { runTether, type CliResult } from "../cli/cli-process.js";

/** Cancelling a run whose effects a live fork inherited, over HTTP and from the CLI. */


let env: TestEnv | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await env?.close();
  env = undefined;
});

type Entry = { type: string; data: Record<string, unknown> };

async function sourceAndFork(): Promise<{ env: TestEnv; ledger: Ledger; id: string; forkId: string }> {
  const ledger = new Ledger();
  env = await makeEnv({ runtime: { agents: [forkyAgent(ledger)] } });
  const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "forky", input: null } });
  const id = started.body.run.id as string;
  await env.runtime.waitFor(id, ["paused"]);
  const forked = await env.call("POST", `/runs/${id}/fork`, { token: env.tokens.operator, body: { fromStep: 2 } });
  expect(forked.status, JSON.stringify(forked.body)).toBe(201);
  const forkId = forked.body.run.id as string;
  await env.runtime.waitFor(forkId, ["paused"]);
  return { env, ledger, id, forkId };
}

function tether(args: string[], url: string, token: string): Promise<CliResult> {
  const environment: NodeJS.ProcessEnv = { ...process.env, TETHER_URL: url, TETHER_TOKEN: token };
  delete environment.TETHER_DB;
  return runTether(args, { env: environment });
}

describe("POST /runs/:id/cancel with a live fork that inherited effects", () => {
  it("the preview lists the fork; a cancel without a choice is 409 fork_inherits_effects; keep undoes only what no fork inherited", async () => {
    const { env, ledger, id, forkId } = await sourceAndFork();

    const preview = await env.call("GET", `/runs/${id}/cancel-preview`, { token: env.tokens.viewer });
    expect(preview.body).toMatchObject({
      compensations: [{ callSeq: 3 }, { callSeq: 2 }, { callSeq: 1 }],
      forks: [{ runId: forkId, status: "paused", fromStep: 2, effects: [2, 1] }],
      inherited: [
        { callSeq: 2, tool: "work", forks: [forkId] },
        { callSeq: 1, tool: "work", forks: [forkId] },
      ],
    });

    const refused = await env.call("POST", `/runs/${id}/cancel`, { token: env.tokens.operator, body: { reason: "off topic" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: "fork_inherits_effects",
      details: { runId: id, forks: [{ runId: forkId, fromStep: 2 }], effects: [{ callSeq: 2, tool: "work", forks: [forkId] }, { callSeq: 1 }] },
    });
    expect(refused.body.error.message).toContain(forkId);
    expect(refused.body.error.message).toContain("work (call 2)");

    const bad = await env.call("POST", `/runs/${id}/cancel`, { token: env.tokens.operator, body: { inherited: "later" } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_input");
    expect((await env.runtime.get(id)).status).toBe("paused");

    const kept = await env.call("POST", `/runs/${id}/cancel`, { token: env.tokens.operator, body: { reason: "off topic", inherited: "keep" } });
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    await env.runtime.waitFor(id, ["cancelled"]);
    const shown = await env.call("GET", `/runs/${id}`, { token: env.tokens.viewer });
    expect(shown.body.run.report).toMatchObject({
      compensated: [{ callSeq: 3, tool: "work" }],
      kept: [
        { callSeq: 2, tool: "work", forks: [forkId] },
        { callSeq: 1, tool: "work", forks: [forkId] },
      ],
    });
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["c"]);

    const journal = (await env.call("GET", `/runs/${id}/journal`, { token: env.tokens.viewer })).body.entries as Entry[];
    const cancels = journal.filter((e) => e.type === "control" && e.data.command === "cancel");
    expect(cancels.map((e) => [e.data.outcome, e.data.inherited ?? null, e.data.actor])).toEqual([
      ["refused: fork_inherits_effects", null, "operator-token"],
      ["requested", "keep", "operator-token"],
    ]);
    expect(cancels[1].data).toMatchObject({ forks: [{ runId: forkId, fromStep: 2 }], inheritedEffects: [{ callSeq: 2 }, { callSeq: 1 }] });
    expect((await env.runtime.get(forkId)).status).toBe("paused");
  });
});

describe("tether cancel with a live fork that inherited effects", () => {
  it("exits 3 naming the fork and the effects and how to choose; --inherited compensate undoes them too", async () => {
    const { env, ledger, id, forkId } = await sourceAndFork();
    const server = await startServer({ runtime: env.runtime, host: "127.0.0.1", port: 0, version: "fork-cancel-test", heartbeatMs: 500 });
    closers.push(() => server.close());

    const refused = await tether(["cancel", id, "--yes"], server.url, env.tokens.operator);
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toContain(`${forkId} (paused, forked from step 2): work (call 2), work (call 1)`);
    expect(refused.stderr).toContain("choose: --inherited keep");
    expect(refused.stderr).toMatch(/tether: cannot cancel run .* without a choice: its live fork .* inherited work \(call 2\), work \(call 1\)/);
    expect(ledger.compensations).toEqual([]);

    const usage = await tether(["cancel", id, "--yes", "--inherited", "maybe"], server.url, env.tokens.operator);
    expect(usage.code).toBe(2);

    const cancelled = await tether(["cancel", id, "--yes", "--inherited", "compensate"], server.url, env.tokens.operator);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stderr).toContain("--inherited compensate: they are undone too");
    expect(cancelled.stdout).toContain("report: 3 compensated, 0 failed");
    expect(ledger.compensations.map((c) => c.input.id)).toEqual(["c", "b", "a"]);
    const journal = await env.runtime.journal(id);
    expect(journal.filter((e) => e.type === "control" && e.data.command === "cancel").map((e) => e.data.inherited ?? null)).toEqual([null, "compensate"]);
  }, 60_000);
});
