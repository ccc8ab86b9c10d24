import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JournalEntry } from "../../src/engine/store.js";
import type { RunView } from "../../src/server/api-types.js";
import { runTether, type CliResult, projectRoot, tsxLoader, mainTs } from "./cli-process.js";

/**
 * `tether approve` and `tether reject` as a user runs them: child processes over one SQLite
 * store, a worker in another process executing the run, each decision journaled.
 */

const root = projectRoot;
const fixtureAgentsPath = join(root, "test/server/fixture-agents.ts");

const cleanEnv = () => {
  const env = { ...process.env };
  for (const name of ["TETHER_URL", "TETHER_TOKEN", "TETHER_DB"]) delete env[name];
  return env;
};

function tether(cwd: string, args: string[]): Promise<CliResult> {
  return runTether(args, { cwd, env: cleanEnv() });
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("tether approve, tether reject", () => {
  let cwd: string;
  let db: string;
  let log: string;
  let worker: ChildProcess;

  beforeAll(async () => {
    cwd = mkdtempSync(join(tmpdir(), "tether-approve-cli-"));
    db = join(cwd, "a.db");
    log = join(cwd, "executed.log");
    writeFileSync(
      join(cwd, "tether.config.ts"),
      `import { aiSdkApprovalAgent, approvalAgent, fixtureAgents } from ${JSON.stringify(fixtureAgentsPath)};\nexport default [...fixtureAgents(), approvalAgent(undefined, { logFile: ${JSON.stringify(log)} }), aiSdkApprovalAgent({ logFile: ${JSON.stringify(log)} })];\n`,
    );
    worker = spawn(process.execPath, ["--import", tsxLoader, mainTs, "--db", db, "worker"], { cwd, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let banner = "";
    worker.stdout!.on("data", (d: Buffer) => (banner += d.toString()));
    worker.stderr!.on("data", (d: Buffer) => (banner += d.toString()));
    await until("the worker banner", () => banner.length > 0);
  });

  afterAll(async () => {
    if (worker) {
      const exited = new Promise((r) => worker.once("exit", r));
      worker.kill("SIGINT");
      await exited;
    }
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  it("shows the calls waiting, approves one with edited arguments and rejects the other with a note; the run continues after both", async () => {
    const started = await tether(cwd, ["--db", db, "start", "payer", "pay two suppliers"]);
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    const show = async () => JSON.parse((await tether(cwd, ["--db", db, "show", id, "--json"])).stdout) as RunView;
    const paused = await until("the run to wait for approval", async () => {
      const run = await show();
      return run.status === "paused" && run;
    });
    expect(paused.statusReason).toBe("approval_required");
    expect(paused.approvals?.map((a) => [a.callSeq, a.tool, a.input])).toEqual([
      [2, "send_payment", { to: "acme", amount: 120 }],
      [3, "send_payment", { to: "globex", amount: 80 }],
    ]);
    const text = await tether(cwd, ["--db", db, "show", id]);
    expect(text.stdout).toContain("WAITS FOR APPROVAL");
    expect(text.stdout).toContain(`tether approve ${id}`);

    const noNote = await tether(cwd, ["--db", db, "reject", id, "--call", "3"]);
    expect(noNote.code).toBe(2);
    const badInput = await tether(cwd, ["--db", db, "approve", id, "--call", "2", "--input", "{not json"]);
    expect(badInput.code).toBe(2);

    const approved = await tether(cwd, ["--db", db, "approve", id, "--call", "2", "--input", '{"to":"acme","amount":99}']);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain("paused");
    const twice = await tether(cwd, ["--db", db, "approve", id, "--call", "2"]);
    expect(twice.code).toBe(3);
    expect(twice.stderr).toContain("already decided");

    const rejected = await tether(cwd, ["--db", db, "reject", id, "--call", "3", "--note", "globex is not a supplier"]);
    expect(rejected.code, rejected.stderr).toBe(0);
    await until("the run to complete", async () => (await show()).status === "completed");
    const executed = existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : [];
    expect(executed.map((l) => l.split(" ").slice(0, 4).join(" "))).toEqual(["executed send_payment acme 99"]);

    const logs = await tether(cwd, ["--db", db, "logs", id, "--json"]);
    const entries = logs.stdout.trim().split("\n").map((l) => JSON.parse(l) as JournalEntry);
    expect(entries.filter((e) => e.type === "approval.decided").map((e) => [e.callSeq, e.data.decision, e.data.actor, e.data.edited ?? null])).toEqual([
      [2, "approved", expect.any(String), true],
      [3, "rejected", expect.any(String), null],
    ]);
    const human = await tether(cwd, ["--db", db, "logs", id]);
    expect(human.stdout).toContain("approval requested: send_payment");
    expect(human.stdout).toContain('rejected by');

    const none = await tether(cwd, ["--db", db, "approve", id]);
    expect(none.code).toBe(3);
  }, 90_000);

  it("an AI SDK tool's own needsApproval: decided from another process, the edited call runs once, the refusal reaches the model as the tool's result", async () => {
    const before = existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean).length : 0;
    const started = await tether(cwd, ["--db", db, "start", "ai-payer", "pay the suppliers"]);
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    const show = async () => JSON.parse((await tether(cwd, ["--db", db, "show", id, "--json"])).stdout) as RunView;
    const paused = await until("the run to wait for approval", async () => {
      const run = await show();
      return run.status === "paused" && run;
    });
    expect(paused.statusReason).toBe("approval_required");
    expect(paused.approvals?.map((a) => [a.tool, a.input])).toEqual([
      ["send_payment", { to: "acme", amount: 120 }],
      ["send_payment", { to: "globex", amount: 80 }],
    ]);
    const [acme, globex] = paused.approvals!.map((a) => a.callSeq);

    const approved = await tether(cwd, ["--db", db, "approve", id, "--call", String(acme), "--input", '{"to":"acme","amount":60}']);
    expect(approved.code, approved.stderr).toBe(0);
    const rejected = await tether(cwd, ["--db", db, "reject", id, "--call", String(globex), "--note", "globex was paid last week"]);
    expect(rejected.code, rejected.stderr).toBe(0);
    const done = await until("the run to complete", async () => {
      const run = await show();
      return run.status === "completed" && run;
    });

    const executed = readFileSync(log, "utf8").trim().split("\n").filter(Boolean).slice(before);
    expect(executed.map((l) => l.split(" ").slice(0, 4).join(" "))).toEqual(["executed send_payment acme 60"]);
    // The model's last turn read both results: the payment made, and the person's refusal with the note.
    expect(String(done.output)).toContain('"sent":60');
    expect(String(done.output)).toContain("globex was paid last week");
    const logs = await tether(cwd, ["--db", db, "logs", id, "--json"]);
    const entries = logs.stdout.trim().split("\n").map((l) => JSON.parse(l) as JournalEntry);
    expect(entries.filter((e) => e.type === "approval.decided").map((e) => [e.callSeq, e.data.decision, e.data.edited ?? null])).toEqual([
      [acme, "approved", true],
      [globex, "rejected", null],
    ]);
  }, 90_000);
});
