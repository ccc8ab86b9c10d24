import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { JournalEntry } from "../../src/engine/store.js";
import type { RunView } from "../../src/server/api-types.js";
import { runTether, type CliResult, projectRoot, tsxLoader, mainTs } from "./cli-process.js";

/**
 * Runs pinned to their agent's version, the stale check of a resume from a CLI without the
 * agent's code, and a run that waits for a worker, as a user meets them: child processes over one SQLite store, the agent's version
 * set per process by AGENT_VERSION.
 */

const root = projectRoot;
const testing = join(root, "src/testing/index.ts");

function env(version?: string): NodeJS.ProcessEnv {
  const out = { ...process.env };
  for (const name of ["TETHER_URL", "TETHER_TOKEN", "TETHER_DB", "AGENT_VERSION"]) delete out[name];
  if (version) out.AGENT_VERSION = version;
  return out;
}

function tether(cwd: string, args: string[], version?: string): Promise<CliResult> {
  return runTether(args, { cwd, env: env(version) });
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("version pinning and the worker's stale check, from the CLI", () => {
  let cwd: string;
  /** A folder with no tether.config.ts: a CLI without the agent's code. */
  let bare: string;
  let db: string;
  let worker: ChildProcess | undefined;

  const startWorker = async (version: string) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, mainTs, "--db", db, "worker"], { cwd, env: env(version), stdio: ["ignore", "pipe", "pipe"] });
    let banner = "";
    child.stdout!.on("data", (d: Buffer) => (banner += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (banner += d.toString()));
    worker = child;
    await until("the worker banner", async () => banner.length > 0);
  };
  const stopWorker = async () => {
    if (!worker) return;
    const exited = new Promise((r) => worker!.once("exit", r));
    worker.kill("SIGINT");
    await exited;
    worker = undefined;
  };
  const show = async (id: string) => JSON.parse((await tether(cwd, ["--db", db, "show", id, "--json"])).stdout) as RunView;
  const journal = async (id: string) =>
    (await tether(cwd, ["--db", db, "logs", id, "--json"])).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as JournalEntry);
  /** A run of version 1 paused by its one-step budget after its first call. */
  const pausedRun = async (agent: string) => {
    await startWorker("1");
    const started = await tether(cwd, ["--db", db, "start", agent, "null"], "1");
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    await until("the run to pause", async () => {
      const run = await show(id);
      return run.status === "paused" && run.lease === null && run;
    });
    await stopWorker();
    return id;
  };

  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), "tether-version-cli-"));
    bare = join(cwd, "bare");
    mkdirSync(bare);
    db = join(cwd, "v.db");
    writeFileSync(
      join(cwd, "tether.config.ts"),
      `import { effectTool, Ledger, sequenceAgent } from ${JSON.stringify(testing)};
const ledger = new Ledger();
const steps = [{ tool: "publish", input: { id: "a" } }, { tool: "note", input: { id: "b" } }];
const tools = [effectTool({ name: "publish", ledger }), effectTool({ name: "note", ledger })];
const version = process.env.AGENT_VERSION ?? "1";
export default [
  { ...sequenceAgent({ name: "pinned", tools, steps, budgets: { maxSteps: 1 } }), version },
  { ...sequenceAgent({ name: "perishable", tools, steps, budgets: { maxSteps: 1 }, staleAfterMs: 1_000 }), version },
];
`,
    );
  });

  afterEach(stopWorker);

  afterAll(() => {
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  it("resume under version 2 exits 3 with version_mismatch naming both versions and the fix; fork --current-version moves it onto version 2", async () => {
    const id = await pausedRun("pinned");
    const refused = await tether(cwd, ["--db", db, "resume", id, "--max-steps", "10"], "2");
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain("started by pinned version 1, and this code has version 2");
    expect(refused.stderr).toContain("compatibleWith");
    expect(refused.stderr).toContain(`tether fork ${id} --from <step> --current-version`);
    const json = await tether(cwd, ["--db", db, "--json", "resume", id, "--max-steps", "10"], "2");
    expect(json.code).toBe(3);
    expect((await show(id)).status).toBe("paused");

    const fork = await tether(cwd, ["--db", db, "fork", id, "--from", "1"], "2");
    expect(fork.code).toBe(3);
    expect(fork.stderr).toContain("cannot fork run");
    const moved = await tether(cwd, ["--db", db, "fork", id, "--from", "1", "--current-version"], "2");
    expect(moved.code, moved.stderr).toBe(0);
    const forkId = moved.stdout.trim();
    expect(await show(forkId)).toMatchObject({ agentVersion: "2", forkedFrom: { runId: id, step: 1 } });
    expect((await journal(forkId))[0]).toMatchObject({ type: "run.created", data: { version: "2", fromVersion: "1" } });
  }, 90_000);

  it("resumed from a CLI without the agent's code: a version 2 worker pauses it with version_mismatch before any call", async () => {
    const id = await pausedRun("pinned");
    const resumed = await tether(bare, ["--db", db, "resume", id, "--max-steps", "10"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const callsBefore = (await journal(id)).filter((e) => e.type === "call.started").length;
    await startWorker("2");
    const paused = await until("the worker to refuse it", async () => {
      const run = await show(id);
      return run.status === "paused" && run.statusReason?.startsWith("version_mismatch") && run;
    });
    expect(paused.statusReason).toContain("started by pinned version 1, this worker has version 2");
    expect((await tether(cwd, ["--db", db, "show", id])).stdout).toContain(`tether fork ${id} --from 1 --current-version`);
    expect((await journal(id)).filter((e) => e.type === "call.started").length).toBe(callsBefore);
  }, 90_000);

  it("a run no worker claims: tether show and tether ls say it waits for a worker once a few seconds passed", async () => {
    const started = await tether(cwd, ["--db", db, "start", "pinned", "null"], "1");
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    await new Promise((r) => setTimeout(r, 3_100));
    const shown = await tether(cwd, ["--db", db, "show", id]);
    expect(shown.stdout).toMatch(/status\s+queued/);
    expect(shown.stdout).toMatch(/waiting\s+waiting for a worker for \d+ s: no worker has claimed it \(start one: `tether worker`/);
    expect((await show(id)).waitingForWorker).toMatchObject({ forMs: expect.any(Number) });
    const listed = await tether(cwd, ["--db", db, "ls"]);
    expect(listed.stdout.split("\n").find((line) => line.startsWith(id))).toContain("waiting for a worker");
    await tether(cwd, ["--db", db, "cancel", id, "--yes", "--no-wait"]);
  }, 60_000);

  it("a stale run resumed from a CLI without the agent's code is checked by the worker: it ends paused for staleness, no call on the stale state", async () => {
    const id = await pausedRun("perishable");
    // The snapshot goes stale after a second.
    await new Promise((r) => setTimeout(r, 1_200));
    const resumed = await tether(bare, ["--db", db, "resume", id, "--max-steps", "10"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const callsBefore = (await journal(id)).filter((e) => e.type === "call.started").length;
    await startWorker("1");
    const paused = await until("the worker's stale check", async () => {
      const run = await show(id);
      return run.status === "paused" && run.statusReason?.startsWith("stale_snapshot") && run;
    });
    expect(paused.statusReason).toMatch(/the snapshot is \d+ s old \(stale after 1 s\)/);
    expect((await journal(id)).filter((e) => e.type === "call.started").length).toBe(callsBefore);
    const forced = await tether(bare, ["--db", db, "resume", id, "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    await until("the forced run to complete", async () => (await show(id)).status === "completed");
  }, 90_000);
});
