import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentDefinition } from "../../src/engine/agent.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { createApp } from "../../src/server/app.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { effectTool, Ledger, sequenceAgent } from "../../src/testing/index.js";

/** Version pinning over HTTP: a server whose agent has version 2, a run started under version 1. */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function agent(version: string, extra: Partial<AgentDefinition> = {}): AgentDefinition {
  const ledger = new Ledger();
  const base = sequenceAgent({
    name: "pinned",
    tools: [effectTool({ name: "publish", ledger }), effectTool({ name: "note", ledger })],
    steps: [
      { tool: "publish", input: { id: "a" } },
      { tool: "note", input: { id: "b" } },
    ],
    budgets: { maxSteps: 1 },
  });
  return { ...base, version, ...extra } as AgentDefinition;
}

async function setup(later: AgentDefinition) {
  const dir = mkdtempSync(join(tmpdir(), "tether-version-api-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const open = (agents: AgentDefinition[]) => {
    const store = new SqliteStore({ path: join(dir, "t.db") });
    const runtime = new Runtime({ store, agents, resolveModel: new ModelRegistry().resolver });
    cleanups.push(async () => {
      await runtime.close();
      await store.close();
    });
    return runtime;
  };
  const v1 = open([agent("1")]);
  const run = await v1.start("pinned", null);
  await v1.waitFor(run.id, ["paused"]);
  await v1.close();
  const v2 = open([later]);
  const app = createApp({ runtime: v2, auth: { mode: "off", actor: "ann" }, version: "test" });
  const call = async (path: string, body: unknown) => {
    const response = await app.fetch(new Request(`http://tether.test/api/v1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    return { status: response.status, body: (await response.json()) as any };
  };
  return { run, v2, call };
}

describe("version pinning over HTTP", () => {
  it("resume answers 409 version_mismatch with both versions; fork needs currentVersion and answers 201 with the run on version 2", async () => {
    const { run, v2, call } = await setup(agent("2"));
    const refused = await call(`/runs/${run.id}/resume`, { budgets: { maxSteps: 10 } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "version_mismatch", details: { runId: run.id, runVersion: "1", currentVersion: "2" } });
    expect(refused.body.error.message).toContain("version 1");
    expect(refused.body.error.message).toContain("version 2");
    expect((await v2.get(run.id)).status).toBe("paused");

    const notMoved = await call(`/runs/${run.id}/fork`, { fromStep: 1 });
    expect(notMoved.status).toBe(409);
    expect(notMoved.body.error.code).toBe("version_mismatch");
    const moved = await call(`/runs/${run.id}/fork`, { fromStep: 1, currentVersion: true });
    expect(moved.status).toBe(201);
    expect(moved.body.run).toMatchObject({ agentVersion: "2", forkedFrom: { runId: run.id, step: 1 }, owner: "ann" });
    expect((await call(`/runs/${run.id}/fork`, { fromStep: 1, currentVersion: "yes" })).status).toBe(400);
  });

  it("resume goes through when version 2 declares itself compatible", async () => {
    const { run, v2, call } = await setup(agent("2", { compatibleWith: ["1"] }));
    const resumed = await call(`/runs/${run.id}/resume`, { budgets: { maxSteps: 10 } });
    expect(resumed.status).toBe(200);
    expect(await v2.waitFor(run.id, ["completed", "failed", "paused"])).toMatchObject({ status: "completed", agentVersion: "1" });
  });
});
