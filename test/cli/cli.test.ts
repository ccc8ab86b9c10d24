import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import type { JournalEntry } from "../../src/engine/store.js";
import { tempPostgres } from "../../src/testing/temp-postgres.js";
import pg from "pg";
import type { RunView } from "../../src/server/api-types.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const mainTs = join(root, "src/cli/main.ts");
const fixtureAgentsPath = join(root, "test/server/fixture-agents.ts");

const hasTmux = (() => {
  try {
    execFileSync("tmux", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

const cleanEnv = () => {
  const env = { ...process.env };
  delete env.TETHER_URL;
  delete env.TETHER_TOKEN;
  delete env.TETHER_DB;
  delete env.TETHER_DATABASE_URL;
  return env;
};

/** Runs `tether …` as a child process (stdin is not a terminal). */
function tether(args: string[], options: { cwd: string; env?: Record<string, string>; timeoutMs?: number }): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, ["--import", tsxLoader, mainTs, ...args], { cwd: options.cwd, env: { ...cleanEnv(), ...options.env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdin.end();
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tether ${args.join(" ")} did not finish in ${options.timeoutMs ?? 30_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? -1, stdout, stderr, ms: Date.now() - started });
    });
  });
}

function configSource(): string {
  return `import { fixtureAgents } from ${JSON.stringify(fixtureAgentsPath)};
export default fixtureAgents({
  tokensPerSecond: Number(process.env.TETHER_TEST_TPS ?? 60),
  rounds: Number(process.env.TETHER_TEST_ROUNDS ?? 12),
  slowMs: Number(process.env.TETHER_TEST_SLOW_MS ?? 4000),
  logFile: process.env.TETHER_TEST_LOG,
});
`;
}

/** `tether serve --port 0` in `cwd`; resolves with its URL once it listens. */
function serve(cwd: string, env: Record<string, string>, extra: string[] = []): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ["--import", tsxLoader, mainTs, "serve", "--port", "0", "--open", ...extra], { cwd, env: { ...cleanEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`tether serve did not start:\n${output}`)), 20_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = /Tether listening on (http:\/\/\S+)/.exec(output);
      if (match && output.includes("auth: ")) {
        clearTimeout(timer);
        resolvePromise({ child, url: match[1], output: () => output });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.on("exit", (code) => reject(new Error(`tether serve exited with ${code}:\n${output}`)));
  });
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

describe("tether CLI against a real `tether serve`", () => {
  let cwd: string;
  let server: Awaited<ReturnType<typeof serve>>;
  let client: TetherClient;
  let cli: (args: string[], options?: { env?: Record<string, string>; timeoutMs?: number }) => Promise<CliResult>;
  const logFile = () => join(cwd, "effects.log");
  const journal = async (id: string): Promise<JournalEntry[]> => client.journalAll(id);

  beforeAll(async () => {
    cwd = mkdtempSync(join(tmpdir(), "tether-cli-"));
    writeFileSync(join(cwd, "tether.config.ts"), configSource());
    server = await serve(cwd, { TETHER_TEST_LOG: join(cwd, "effects.log") });
    client = new TetherClient({ baseUrl: server.url });
    cli = (args, options = {}) => tether(args, { cwd, env: { TETHER_URL: server.url, ...options.env }, timeoutMs: options.timeoutMs });
  }, 30_000);

  afterAll(async () => {
    if (server?.child.exitCode === null) {
      const exited = new Promise((r) => server.child.once("exit", r));
      server.child.kill("SIGINT");
      await exited;
    }
    rmSync(cwd, { recursive: true, force: true });
  });

  async function startWriter(prompt = "write about pausing"): Promise<string> {
    const started = await cli(["start", "writer", prompt]);
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    expect(id).toMatch(/^run_[0-9a-f]+$/);
    return id;
  }

  it("serve loaded the agents of tether.config.ts", async () => {
    expect(server.output()).toContain("agents: writer, slow, stale (from tether.config.ts)");
    const agents = await cli(["agents", "--json"]);
    expect(JSON.parse(agents.stdout).map((a: { name: string }) => a.name)).toEqual(["writer", "slow", "stale"]);
  });

  it("start → pause from a second process → paused, no call starts after → resume → logs -f follows it to completed", async () => {
    const id = await startWriter();
    await until("two steps", async () => (await client.get(id)).step >= 2);
    const paused = await cli(["pause", id, "--reason", "look first"]);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toContain(`${id} is paused (look first)`);
    expect((await client.get(id)).status).toBe("paused");

    const before = await journal(id);
    const pausedAt = before.findIndex((e) => e.type === "status" && e.data.to === "paused");
    const pauseCommand = before.findIndex((e) => e.type === "control" && e.data.command === "pause");
    expect(pauseCommand).toBeGreaterThan(-1);
    expect(before.slice(pauseCommand).filter((e) => e.type === "call.started")).toEqual([]);
    expect(before[pauseCommand].data.actor).toBe("anonymous");
    await new Promise((r) => setTimeout(r, 400));
    expect((await journal(id)).length).toBe(before.length);
    expect((await client.get(id)).status).toBe("paused");

    const shown = await cli(["show", id]);
    expect(shown.stdout).toMatch(/status\s+paused \(look first\)/);
    const listed = await cli(["ls", "--status", "paused"]);
    expect(listed.stdout).toContain(id);

    const resumed = await cli(["resume", id, "--message", "keep it short"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`${id} is (running|queued)`));
    const followed = await cli(["logs", id, "-f"], { timeoutMs: 40_000 });
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stdout).toContain("status running → completed");
    expect(followed.stdout).toContain("│ Turn");
    expect(followed.stdout).toMatch(/▶ model simulated:sim-1 \(call \d+\)/);
    expect(followed.stdout).toMatch(/✓ tool publish_draft/);
    expect(followed.stdout).toContain('✎ message from anonymous: "keep it short"');
    const all = await journal(id);
    expect(pausedAt).toBeGreaterThan(-1);
    const resume = all.findIndex((e) => e.type === "control" && e.data.command === "resume");
    expect(all.slice(pausedAt, resume).filter((e) => e.type === "call.started")).toEqual([]);
    expect((await client.get(id)).status).toBe("completed");
  }, 60_000);

  it("cancel lists the compensations, refuses without --yes when stdin is not a terminal, then runs them newest first", async () => {
    const id = await startWriter();
    await until("two published drafts", async () => (await client.get(id)).pendingCompensations.length >= 2);
    const refused = await cli(["cancel", id]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("pass --yes");
    expect(refused.stderr).toMatch(/undo \d+ effects, newest first/);
    expect(["running", "pausing", "paused"]).toContain((await client.get(id)).status);

    const cancelled = await cli(["cancel", id, "--yes", "--reason", "wrong topic"]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    const listed = [...cancelled.stderr.matchAll(/call (\d+)\s+publish_draft \{"title":"(draft \d+)"\}/g)].map((m) => ({ callSeq: Number(m[1]), title: m[2] }));
    expect(listed.length).toBeGreaterThanOrEqual(2);
    expect(listed.map((l) => l.callSeq)).toEqual([...listed].map((l) => l.callSeq).sort((a, b) => b - a));
    expect(cancelled.stderr).toContain("↺ compensated publish_draft");
    expect(cancelled.stdout).toContain(`${id} is cancelled (wrong topic)`);
    const run = await client.get(id);
    expect(run.status).toBe("cancelled");
    const compensatedNow = readFileSync(logFile(), "utf8")
      .split("\n")
      .filter((l) => l.startsWith("compensated"));
    const mine = run.report!.compensated.map((c) => c.callSeq);
    expect(mine.length).toBeGreaterThanOrEqual(listed.length);
    expect(cancelled.stdout).toContain(`report: ${mine.length} compensated, 0 failed`);
    for (const { title } of listed) expect(compensatedNow).toContain(`compensated publish_draft ${title}`);
    const order = listed.map(({ title }) => compensatedNow.lastIndexOf(`compensated publish_draft ${title}`));
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  }, 40_000);

  it("--db pauses straight through the store; the serving process notices within 50 ms", async () => {
    const dbPath = join(cwd, ".tether", "tether.db");
    const latencies: number[] = [];
    for (let i = 0; i < 3; i++) {
      const id = (await client.start("writer", `direct ${i}`)).id;
      await until("running", async () => (await client.get(id)).step >= 1);
      const paused = await cli(["--db", dbPath, "pause", id, "--reason", "direct"]);
      expect(paused.code, paused.stderr).toBe(0);
      expect(paused.stdout).toContain(`${id} is paused (direct)`);
      const entries = await journal(id);
      const command = entries.find((e) => e.type === "control" && e.data.command === "pause")!;
      expect(command.data.actor).toMatch(/^cli/);
      // The first thing the executing process wrote after the command: the abort of the call in flight, or the pause itself.
      const noticed = entries.find((e) => e.seq > command.seq && (e.type === "call.aborted" || (e.type === "status" && e.data.to === "paused")));
      expect(noticed, "the serving process acted on the pause").toBeDefined();
      latencies.push(noticed!.at - command.at);
      expect(entries.filter((e) => e.seq > command.seq && e.type === "call.started")).toEqual([]);
      await client.cancel(id);
    }
    latencies.sort((a, b) => a - b);
    console.log(`--db pause noticed by the serving process after ${latencies.join(", ")} ms`);
    // How fast is the benchmark's business (npm run bench); here: every pause was noticed, in order.
    expect(latencies.every((ms) => ms >= 0)).toBe(true);
  }, 40_000);

  it("exit codes: 4 not found, 3 illegal transition or stale, 2 usage, 1 unreachable", async () => {
    const missing = await cli(["show", "run_missing"]);
    expect(missing.code).toBe(4);
    expect(missing.stderr.trim().split("\n")).toEqual(["tether: run run_missing does not exist: list runs with `tether ls` [run_not_found]"]);
    // With --json the error is JSON too, as the API answers it; a mistake in the call as well.
    const missingJson = await cli(["show", "run_missing", "--json"]);
    expect(missingJson.code).toBe(4);
    expect(JSON.parse(missingJson.stderr)).toEqual({ error: { code: "run_not_found", message: "run run_missing does not exist", hint: "list runs with `tether ls`" } });
    const unknownJson = await cli(["--json", "shw"]);
    expect(unknownJson.code).toBe(2);
    expect(JSON.parse(unknownJson.stderr)).toEqual({ error: { code: "usage", message: "unknown command 'shw' (Did you mean show?)", hint: "see `tether --help`" } });
    // As one line, like every other error: the message, what to do, the code.
    const unknownText = await cli(["shw"]);
    expect(unknownText.code).toBe(2);
    expect(unknownText.stderr).toBe("tether: unknown command 'shw' (Did you mean show?): see `tether --help` [usage]\n");
    const badValue = await cli(["ls", "--limit", "x"]);
    expect(badValue.stderr).toBe("tether: option '--limit <n>' argument 'x' is invalid. --limit must be a whole number of at least 1: see `tether ls --help` [usage]\n");
    // A command with no subcommand still shows its help under --json.
    expect((await cli(["token", "--json"])).stderr).toContain("Usage: tether token [options] [command]");
    // Errors of a start point at the fix: where the server's agents come from and how to add one; the input an agent takes.
    const ghost = await cli(["start", "ghost", "x"]);
    expect(ghost.code).toBe(4);
    expect(ghost.stderr.trim()).toBe(
      `tether: no agent named "ghost" is registered (known: writer, slow, stale; loaded from ${join(cwd, "tether.config.ts")}). Export it from tether.config.ts next to your package.json (export default [myAgent]) or pass --agents <file>; tether serve loads agents when it starts: list agents with \`tether agents\` [unknown_agent]`,
    );
    const badInput = await cli(["start", "writer", "--input", "42"]);
    expect(badInput.code).toBe(2);
    expect(badInput.stderr).toMatch(/^tether: invalid input for agent writer: .+\. It takes: string \| \{ prompt: string \} \[invalid_input\]\n$/);
    // Straight on a store, in a folder with no config: the CLI says it fell back to the bundled examples.
    const empty = mkdtempSync(join(tmpdir(), "tether-cli-empty-"));
    try {
      const direct = await tether(["start", "ghost", "x", "--db", join(empty, "t.db")], { cwd: empty });
      expect(direct.code).toBe(4);
      expect(direct.stderr).toContain(`(known: deep-research, code-agent, browser-flow; loaded from the bundled examples, as no --agents <file> was given and ${empty} has no tether.config.ts)`);
      expect(direct.stderr).toContain("Export it from tether.config.ts next to your package.json (export default [myAgent]) or pass --agents <file>");
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }

    const id = (await client.start("writer", "to be cancelled")).id;
    await until("cancelled", async () => {
      const run = await client.get(id);
      if (run.status === "running") await client.cancel(id);
      return run.status === "cancelled";
    });
    const illegal = await cli(["pause", id]);
    expect(illegal.code).toBe(3);
    expect(illegal.stderr).toContain("it is cancelled");
    expect((await cli(["resume", id])).code).toBe(3);

    const usageCases = [["pause"], ["show"], ["ls", "--bogus"], ["fork", id], ["start", "writer"], ["resume", id, "--resolve", "maybe"], ["resume", id, "--patch", "{nope"], ["nonsense"], ["ls", "--limit", "x"]];
    for (let i = 0; i < usageCases.length; i += 3) {
      const batch = usageCases.slice(i, i + 3);
      const results = await Promise.all(batch.map((args) => cli(args)));
      expect(results.map((r, j) => ({ args: batch[j], code: r.code }))).toEqual(batch.map((args) => ({ args, code: 2 })));
    }
    const unreachable = await tether(["ls"], { cwd, env: { TETHER_URL: "http://127.0.0.1:9" } });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain("start the server with `tether serve`");
    const help = await cli(["cancel", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--yes");
  }, 60_000);

  it("fork --from starts a new run from a step; halt and unhalt", async () => {
    const id = (await client.start("writer", "to fork")).id;
    await until("3 steps", async () => (await client.get(id)).step >= 3);
    const forked = await cli(["fork", id, "--from", "2"]);
    expect(forked.code, forked.stderr).toBe(0);
    const forkId = forked.stdout.trim();
    expect((await client.get(forkId)).forkedFrom).toEqual({ runId: id, step: 2 });
    const halted = await cli(["halt", "--agent", "writer", "--reason", "drill"]);
    expect(halted.code, halted.stderr).toBe(0);
    expect(halted.stdout).toMatch(/halted \d+ runs? \(scope agent:writer\)/);
    expect((await client.get(id)).status).toBe("halted");
    // The halt was written by the CLI's process; the worker in the serving process stops the run:
    // it lets go of its lease and of the call in flight, which is journaled as aborted by the halt,
    // and no call starts after it.
    const released = await until("the serving worker to let the halted run go", async () => {
      const run = await client.get(id);
      return run.lease === null && run.inflight === null && (run.inflightCalls ?? []).length === 0 && run;
    });
    expect(released.status).toBe("halted");
    const haltJournal = await journal(id);
    const haltAt = haltJournal.findIndex((e) => e.type === "status" && e.data.to === "halted");
    expect(haltAt).toBeGreaterThan(-1);
    expect(haltJournal.slice(haltAt).filter((e) => e.type === "call.started")).toEqual([]);
    const endedBefore = new Set(haltJournal.slice(0, haltAt).filter((e) => ["call.completed", "call.failed", "call.aborted"].includes(e.type)).map((e) => e.callSeq));
    const openAtHalt = haltJournal.slice(0, haltAt).filter((e) => e.type === "call.started" && !endedBefore.has(e.callSeq)).map((e) => e.callSeq);
    for (const callSeq of openAtHalt) {
      const ended = haltJournal.slice(haltAt).find((e) => e.callSeq === callSeq && e.type !== "call.started");
      expect([ended?.type, ended?.data.reason], `call ${callSeq} in flight at the halt`).toEqual(["call.aborted", "halted"]);
    }
    expect((await cli(["start", "writer", "blocked"])).code).toBe(3);
    const list = await cli(["halt", "--list", "--json"]);
    expect(JSON.parse(list.stdout).halts[0]).toMatchObject({ scope: "agent:writer", reason: "drill" });
    const lifted = await cli(["unhalt", "--agent", "writer"]);
    expect(lifted.code).toBe(0);
    expect((await client.get(id)).status).toBe("paused");
    // The fork first: it inherited the run's effects, and a cancel of the run would otherwise ask what to do with them.
    await client.cancel(forkId).catch(() => undefined);
    await client.cancel(id);
  }, 40_000);

  it("worker executes runs started with --db; logs -f --db follows them to the end", async () => {
    const db = join(cwd, "worker", "w.db");
    const worker = spawn(process.execPath, ["--import", tsxLoader, mainTs, "--db", db, "worker"], { cwd, env: { ...cleanEnv(), TETHER_TEST_TPS: "400" }, stdio: ["ignore", "pipe", "pipe"] });
    try {
      let banner = "";
      worker.stdout!.on("data", (d: Buffer) => (banner += d.toString()));
      await until("the worker banner", async () => banner.includes("executing runs from"), 20_000);
      const started = await cli(["--db", db, "start", "writer", "offline"]);
      expect(started.code, started.stderr).toBe(0);
      expect(started.stderr).toContain(`it is queued in ${db}: a \`tether serve\` or \`tether worker\` on that store executes it (this command executes nothing)`);
      const followed = await cli(["--db", db, "logs", started.stdout.trim(), "-f", "--no-text"]);
      expect(followed.code, followed.stderr).toBe(0);
      expect(followed.stdout).toContain("created: agent writer v1 by cli:");
      expect(followed.stdout).toContain("status running → completed");
    } finally {
      const exited = new Promise<number | null>((r) => worker.once("exit", (code) => r(code)));
      worker.kill("SIGINT");
      expect(await exited).toBe(0);
    }
  }, 40_000);

  it("token create prints a token once; token ls never shows secrets; token revoke keeps the row", async () => {
    const db = join(cwd, "tokens", "t.db");
    const created = await cli(["--db", db, "token", "create", "--role", "operator", "--name", "ci"]);
    expect(created.code, created.stderr).toBe(0);
    const token = created.stdout.trim();
    expect(token).toMatch(/^tether_[A-Za-z0-9_-]{40,}$/);
    expect(created.stderr).toContain("shown only once");
    const listed = await cli(["--db", db, "token", "ls", "--json"]);
    const tokens = JSON.parse(listed.stdout);
    expect(tokens).toEqual([expect.objectContaining({ name: "ci", role: "operator", revokedAt: null })]);
    expect(listed.stdout).not.toContain(token);
    expect(JSON.stringify(tokens)).not.toContain("hash");
    expect((await cli(["--db", db, "token", "create", "--role", "root", "--name", "x"])).code).toBe(2);

    // Revoked: its row stays (revokedAt set), a second revoke says so, an unknown id is not found.
    const id = tokens[0].id as string;
    const revoked = await cli(["--db", db, "token", "revoke", id]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout.trim()).toBe(`revoked operator token "ci" (${id}): requests with it are refused from now on`);
    expect(revoked.stderr).toContain("no active admin token is left");
    const after = JSON.parse((await cli(["--db", db, "token", "ls", "--json"])).stdout) as { id: string; revokedAt: number | null }[];
    expect(after).toEqual([expect.objectContaining({ id, name: "ci", revokedAt: expect.any(Number) })]);
    const again = await cli(["--db", db, "token", "revoke", id, "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual(expect.objectContaining({ id, revokedAt: after[0].revokedAt }));
    const unknown = await cli(["--db", db, "token", "revoke", "tok_nope"]);
    expect(unknown.code).toBe(4);
    expect(unknown.stderr.trim()).toBe(`tether: no token tok_nope in ${db}: list them with \`tether token ls\` [not_found]`);
  });

  it("prune refuses an age with no unit, a batch of none, and an age before any date, before it touches the store", async () => {
    const db = join(cwd, "prune", "t.db");
    const bare = await cli(["--db", db, "prune", "--completed-before", "30"]);
    expect(bare.code).toBe(2);
    expect(bare.stderr.trim()).toBe('tether: --completed-before "30" is not an age: use a number and a unit, as in 30d, 12h, 45m or 90s (a number alone is refused: days or milliseconds?) [invalid_input]');
    expect((await cli(["--db", db, "prune", "--completed-before", "30d", "--batch", "0"])).stderr).toContain("--batch must be a whole number of at least 1");
    expect((await cli(["--db", db, "prune", "--completed-before", "30d", "--batch", "abc"])).code).toBe(2);
    const ancient = await cli(["--db", db, "prune", "--completed-before", "99999999999d"]);
    expect(ancient.code).toBe(2);
    expect(ancient.stderr).toContain("reaches back before any date");
    expect(existsSync(db)).toBe(false);
  });

  it("serve and worker refuse a concurrency of 0 and a lease under a second or over a day, before they start", async () => {
    for (const command of ["serve", "worker"]) {
      const none = await cli(["--db", join(cwd, "flags", "t.db"), command, "--concurrency", "0"]);
      expect(none.code, command).toBe(2);
      expect(none.stderr, command).toContain("--concurrency must be a whole number of at least 1");
      const brief = await cli(["--db", join(cwd, "flags", "t.db"), command, "--lease-ms", "0"]);
      expect(brief.code, command).toBe(2);
      expect(brief.stderr, command).toContain("--lease-ms must be a whole number from 1000 to 86400000");
      // A lease of centuries: a dead worker's runs would never be taken over (and Node's timers overflow).
      const endless = await cli(["--db", join(cwd, "flags", "t.db"), command, "--lease-ms", "99999999999999"]);
      expect(endless.code, command).toBe(2);
      expect(endless.stderr, command).toContain("--lease-ms must be a whole number from 1000 to 86400000");
    }
  });

  it("a cancel no worker can apply says so at once, and gives up after --timeout with wait_timeout (the command stays recorded)", async () => {
    const db = join(cwd, "no-worker", "tether.db");
    const started = await tether(["--db", db, "start", "writer", "nobody runs this"], { cwd });
    expect(started.code, started.stderr).toBe(0);
    const runId = started.stdout.trim();
    const cancel = await tether(["--db", db, "cancel", runId, "--yes", "--timeout", "1"], { cwd });
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toContain("cancelling: no worker holds it yet: it goes on once one claims it (start one: `tether worker` or `tether serve` on this store)");
    const last = cancel.stderr.trim().split("\n").at(-1)!;
    expect(last).toBe(
      `tether: run ${runId} is still cancelling after 1 s; no worker holds it yet: it goes on once one claims it (start one: \`tether worker\` or \`tether serve\` on this store); the command is recorded and will apply: check with \`tether show ${runId}\` [wait_timeout]`,
    );
    const shown = await tether(["--db", db, "show", runId, "--json"], { cwd });
    expect(JSON.parse(shown.stdout)).toMatchObject({ status: "cancelling" });
  }, 40_000);

  it("a store or server named on the command line wins over the environment's; --db with --database-url is refused", async () => {
    const db = join(cwd, "precedence", "tether.db");
    // Were TETHER_DATABASE_URL used, `ls` would fail to reach port 1 (store_error), not find no file.
    const env = { TETHER_DATABASE_URL: "postgres://postgres@127.0.0.1:1/nowhere" };
    const file = await tether(["--db", db, "ls"], { cwd, env });
    expect(file.code).toBe(4);
    expect(file.stderr.trim()).toBe(`tether: no Tether store at ${db}: check the path (--db or TETHER_DB); \`tether start\`, \`tether serve\` or \`tether worker\` create one [not_found]`);
    // --url over TETHER_DB: the command goes to the server (unreachable here), not to the missing file.
    const server = await tether(["--url", "http://127.0.0.1:9", "ls"], { cwd, env: { TETHER_DB: db } });
    expect(server.code).toBe(1);
    expect(server.stderr).toContain("http://127.0.0.1:9");
    // --database-url over TETHER_DB: PostgreSQL is tried (and refused at port 1).
    const postgres = await tether(["--database-url", "postgres://postgres@127.0.0.1:1/nowhere", "ls"], { cwd, env: { TETHER_DB: db } });
    expect(postgres.code).toBe(1);
    expect(postgres.stderr).toContain("127.0.0.1:1");
    expect(postgres.stderr).toContain("[store_error]");
    const both = await tether(["--db", db, "--database-url", "postgres://postgres@127.0.0.1:1/nowhere", "ls"], { cwd });
    expect(both.code).toBe(2);
    expect(both.stderr.trim()).toBe("tether: --db and --database-url name two stores: pass one [usage]");
    expect(existsSync(db)).toBe(false);
  }, 60_000);

  it("a --db that names no file is refused (exit 4) by every command but those that create a store, and never created", async () => {
    const db = join(cwd, "typo", "tether.db");
    for (const args of [["ls"], ["show", "run_1"], ["prune", "--completed-before", "30d", "--dry-run"], ["verify"], ["halt", "--list"]]) {
      const refused = await cli(["--db", db, ...args]);
      expect(refused.code, args.join(" ")).toBe(4);
      expect(refused.stderr.trim(), args.join(" ")).toBe(`tether: no Tether store at ${db}: check the path (--db or TETHER_DB); \`tether start\`, \`tether serve\` or \`tether worker\` create one [not_found]`);
    }
    expect(existsSync(db)).toBe(false);
  });

  it("serve refuses a non-loopback host without a token", async () => {
    const other = mkdtempSync(join(tmpdir(), "tether-cli-open-"));
    try {
      writeFileSync(join(other, "tether.config.ts"), configSource());
      const refused = await tether(["serve", "--host", "0.0.0.0", "--port", "0"], { cwd: other });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("refusing to listen on 0.0.0.0 with no API token");
      expect(refused.stderr).toContain("tether token create");
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("serve never opens itself: no token means refusal unless --open; tokens lost from the database mean refusal even with --open", async () => {
    const other = mkdtempSync(join(tmpdir(), "tether-cli-auth-"));
    try {
      writeFileSync(join(other, "tether.config.ts"), configSource());
      const refused = await tether(["serve", "--port", "0"], { cwd: other });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("refusing to serve with no API token");
      expect(refused.stderr).toContain("--open");
      // A token, then the database loses it (as a lost -wal file would): the next serve refuses.
      const created = await tether(["token", "create", "--role", "admin", "--name", "ada"], { cwd: other });
      expect(created.code, created.stderr).toBe(0);
      expect(JSON.parse(readFileSync(join(other, ".tether", "tether.db.auth.json"), "utf8")).tokenIds).toHaveLength(1);
      const db = new (createRequire(import.meta.url)("better-sqlite3"))(join(other, ".tether", "tether.db"));
      db.prepare("DELETE FROM tokens").run();
      db.close();
      for (const extra of [[], ["--open"]]) {
        const lost = await tether(["serve", "--port", "0", ...extra], { cwd: other });
        expect(lost.code, extra.join(" ")).toBe(1);
        expect(lost.stderr).toMatch(/no longer holds 1 API token\(s\) it had .*Refusing to serve/);
      }
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("a revocation the database loses is caught: serve refuses while a revoked token is active again", async () => {
    const other = mkdtempSync(join(tmpdir(), "tether-cli-unrevoked-"));
    try {
      writeFileSync(join(other, "tether.config.ts"), configSource());
      const created = await tether(["token", "create", "--role", "admin", "--name", "ada", "--json"], { cwd: other });
      const { id } = JSON.parse(created.stdout) as { id: string };
      expect((await tether(["token", "revoke", id], { cwd: other })).code).toBe(0);
      await tether(["token", "create", "--role", "admin", "--name", "bob"], { cwd: other });
      expect(JSON.parse(readFileSync(join(other, ".tether", "tether.db.auth.json"), "utf8")).revokedIds).toEqual([id]);
      // The database loses the revocation (a backup taken before it, a lost -wal file).
      const db = new (createRequire(import.meta.url)("better-sqlite3"))(join(other, ".tether", "tether.db"));
      db.prepare("UPDATE tokens SET revoked_at = NULL WHERE id = ?").run(id);
      db.close();
      const lost = await tether(["serve", "--port", "0"], { cwd: other });
      expect(lost.code).toBe(1);
      expect(lost.stderr).toContain(`holds 1 API token(s) as active that were revoked (${id})`);
      // Revoked again, it serves.
      expect((await tether(["token", "revoke", id], { cwd: other })).code).toBe(0);
      const serving = spawn(process.execPath, ["--import", tsxLoader, mainTs, "serve", "--port", "0"], { cwd: other, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
      try {
        let out = "";
        serving.stdout.on("data", (d: Buffer) => (out += d.toString()));
        serving.stderr.on("data", (d: Buffer) => (out += d.toString()));
        await until("serve to start", async () => (/http:\/\/127\.0\.0\.1:\d+/.test(out) ? true : undefined), 20_000);
      } finally {
        const exited = new Promise((r) => serving.once("exit", r));
        serving.kill("SIGINT");
        await exited;
      }
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  }, 60_000);

  describe.skipIf(!hasTmux)("attach, driven through tmux", () => {
    const session = `tether-attach-${process.pid}`;
    const screen = () => execFileSync("tmux", ["capture-pane", "-p", "-J", "-t", session], { encoding: "utf8" });
    const statusLine = () =>
      screen()
        .split("\n")
        .filter((l) => l.includes("p pause · r resume"))
        .at(-1) ?? "";
    const sendKeys = (...keys: string[]) => execFileSync("tmux", ["send-keys", "-t", session, ...keys]);
    const waitForScreen = (what: string, test: (text: string) => boolean, timeoutMs = 15_000) =>
      until(`${what} on the attach screen`, async () => test(screen()), timeoutMs).catch((error: Error) => {
        throw new Error(`${error.message}\n--- screen ---\n${screen()}`);
      });
    const openAttach = (id: string) => {
      const command = [process.execPath, "--import", tsxLoader, mainTs, "--url", server.url, "attach", id].map((a) => `'${a}'`).join(" ");
      execFileSync("tmux", ["new-session", "-d", "-s", session, "-x", "200", "-y", "50", `${command}; echo ATTACH_EXIT=$?; sleep 120`], { cwd, env: cleanEnv() });
    };
    const closeSession = () => {
      try {
        execFileSync("tmux", ["kill-session", "-t", session], { stdio: "ignore" });
      } catch {
        // Already gone.
      }
    };

    it("p pauses, r resumes, c asks with the compensations and y cancels, q detaches; the status line follows", async () => {
      const id = await startWriter();
      openAttach(id);
      try {
        await waitForScreen("[running]", () => statusLine().includes("[running]"));
        expect(statusLine()).toMatch(/\[running\] · step \d+ · \d+ tok · \$[\d.]+ · [\d.]+ (ms|s) active/);
        sendKeys("p");
        await waitForScreen("[paused]", () => statusLine().includes("[paused]"));
        expect((await client.get(id)).status).toBe("paused");
        expect(statusLine()).toContain("paused from tether attach");
        const steps = (await client.get(id)).step;
        sendKeys("r");
        await waitForScreen("[running] again", () => statusLine().includes("[running]"));
        await until("published drafts", async () => (await client.get(id)).pendingCompensations.length >= 1 && (await client.get(id)).step > steps);
        sendKeys("c");
        await waitForScreen("the cancel question", (s) => /Cancel run_[0-9a-f]+\? It will undo \d+, newest first: publish_draft \(call \d+\)/.test(s));
        expect(["running", "pausing", "paused"]).toContain((await client.get(id)).status);
        sendKeys("y");
        // The run kept publishing while the question was open: attach asks again when what a
        // cancel would do changed meanwhile, and the person answers again.
        await waitForScreen("[cancelled] or the question asked again", (s) => statusLine().includes("[cancelled]") || s.includes("changed while you decided"));
        if (!statusLine().includes("[cancelled]")) sendKeys("y");
        await waitForScreen("[cancelled]", () => statusLine().includes("[cancelled]"));
        expect(screen()).toContain("↺ compensated publish_draft");
        expect((await client.get(id)).status).toBe("cancelled");
        sendKeys("q");
        await waitForScreen("the attach exit", (s) => s.includes("ATTACH_EXIT=0"));
        expect(screen()).toContain(`detached from ${id}; it is cancelled`);
      } finally {
        closeSession();
      }
    }, 60_000);

    it("tether cancel asks again when what it would undo changed while the question was open", async () => {
      const id = await startWriter();
      await until("a published draft", async () => (await client.get(id)).pendingCompensations.length >= 1);
      const command = [process.execPath, "--import", tsxLoader, mainTs, "--url", server.url, "cancel", id].map((a) => `'${a}'`).join(" ");
      execFileSync("tmux", ["new-session", "-d", "-s", session, "-x", "200", "-y", "50", `${command}; echo CANCEL_EXIT=$?; sleep 120`], { cwd, env: cleanEnv() });
      try {
        await waitForScreen("the question", (s) => s.includes(`Cancel ${id}? [y/N]`));
        const asked = (await client.get(id)).pendingCompensations.length;
        // The run goes on while the person reads: it publishes another draft before the answer.
        await until("another published draft", async () => (await client.get(id)).pendingCompensations.length > asked);
        sendKeys("y", "Enter");
        await waitForScreen("the question asked again", (s) => s.includes("What a cancel would do changed while you decided:") && s.split(`Cancel ${id}? [y/N]`).length === 3);
        expect((await client.get(id)).status).not.toBe("cancelling");
        // Each question asked is answered yes (the run may publish once more before an answer lands).
        let answered = 1;
        await until("the cancel to finish", async () => {
          const text = screen();
          if (text.includes("CANCEL_EXIT=")) return true;
          if (text.split(`Cancel ${id}? [y/N]`).length - 1 > answered) {
            answered += 1;
            sendKeys("y", "Enter");
          }
          return false;
        }, 30_000);
        expect(screen()).toContain("CANCEL_EXIT=0");
        const cancelled = await client.get(id);
        expect(cancelled.status).toBe("cancelled");
        expect(cancelled.report!.compensated.length).toBeGreaterThan(asked);
      } finally {
        closeSession();
      }
    }, 60_000);

    it("pausing while a tool cannot be interrupted shows what it waits on; Ctrl-C once pauses, twice detaches without killing the run", async () => {
      const started = await cli(["start", "slow", "wait for it"]);
      const id = started.stdout.trim();
      await until("the slow tool in flight", async () => (await client.get(id)).inflight?.name === "slow_lookup");
      openAttach(id);
      try {
        await waitForScreen("[running]", () => statusLine().includes("[running]"));
        sendKeys("C-c");
        await waitForScreen("[pausing] waiting on the tool", () => /\[pausing\].*waiting on tool slow_lookup for [\d.]+ (ms|s)/.test(statusLine()));
        await waitForScreen("[paused]", () => statusLine().includes("[paused]"), 10_000);
        expect(screen()).toContain("Ctrl-C again to detach");
        sendKeys("C-c");
        await waitForScreen("the attach exit", (s) => s.includes("ATTACH_EXIT=0"));
        const run = await client.get(id);
        expect(run.status).toBe("paused");
        expect((await client.journalAll(id)).filter((e) => e.type === "call.completed" && e.data.name === "slow_lookup")).toHaveLength(1);
        await client.cancel(id);
      } finally {
        closeSession();
      }
    }, 40_000);
  });

  it("demo (stdin not a terminal) serves, prints the dashboard URL with the token, follows the run and exits 0 when it ends", async () => {
    const demoCwd = mkdtempSync(join(tmpdir(), "tether-demo-"));
    try {
      const demo = await tether(["demo", "--port", "0", "--no-attach", "--exit-when-done", "--speed", "1000"], { cwd: demoCwd, timeoutMs: 60_000 });
      expect(demo.code, demo.stderr).toBe(0);
      expect(demo.stdout).toMatch(/dashboard: http:\/\/127\.0\.0\.1:\d+\/#token=tether_[A-Za-z0-9_-]+/);
      expect(demo.stdout).toMatch(/token: {5}tether_/);
      expect(demo.stdout).toMatch(/status running → completed/);
      expect(demo.stdout).toMatch(/run run_[0-9a-f]+ is completed/);
      expect(existsSync(join(demoCwd, ".tether", "tether.db"))).toBe(true);
      // Its admin token lived as long as the demo.
      const tokens = JSON.parse((await tether(["token", "ls", "--json"], { cwd: demoCwd })).stdout) as { role: string; revokedAt: number | null }[];
      expect(tokens).toEqual([expect.objectContaining({ role: "admin", revokedAt: expect.any(Number) })]);
    } finally {
      rmSync(demoCwd, { recursive: true, force: true });
    }
  }, 70_000);

  it("a --database-url whose schema holds no store is refused (exit 4) by every command but those that create one, and never created", async () => {
    const db = tempPostgres("typo");
    try {
      const url = `${db.url}${db.url.includes("?") ? "&" : "?"}schema=${db.schema}`;
      for (const args of [["ls"], ["show", "run_1"], ["pause", "run_1"], ["prune", "--completed-before", "30d", "--dry-run"], ["halt", "--list"]]) {
        const refused = await tether(["--database-url", url, ...args], { cwd });
        expect(refused.code, args.join(" ")).toBe(4);
        expect(refused.stderr.trim(), args.join(" ")).toMatch(
          new RegExp(`^tether: no Tether store in schema ${db.schema} at .*: check the schema \\(\\?schema=, default tether\\); \`tether start\`, \`tether serve\` or \`tether worker\` create one \\[not_found\\]$`),
        );
      }
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [db.schema]);
        expect(rows).toEqual([]);
      } finally {
        await client.end();
      }
      // start creates the store, as on SQLite; from then on the same commands work.
      const started = await tether(["--database-url", url, "start", "writer", "into a new schema"], { cwd });
      expect(started.code, started.stderr).toBe(0);
      const listed = await tether(["--database-url", url, "ls", "--json"], { cwd });
      expect(listed.code, listed.stderr).toBe(0);
      expect((JSON.parse(listed.stdout) as RunView[]).map((r) => r.id)).toEqual([started.stdout.trim()]);
    } finally {
      await db.cleanup();
    }
  }, 60_000);

  it("demo --database-url runs on PostgreSQL: the run and the token are in the database, nothing in .tether/", async () => {
    const demoCwd = mkdtempSync(join(tmpdir(), "tether-demo-pg-"));
    const db = tempPostgres("demo");
    try {
      const url = `${db.url}${db.url.includes("?") ? "&" : "?"}schema=${db.schema}`;
      const demo = await tether(["demo", "--database-url", url, "--port", "0", "--no-attach", "--exit-when-done", "--speed", "1000"], { cwd: demoCwd, timeoutMs: 60_000 });
      expect(demo.code, demo.stderr).toBe(0);
      expect(demo.stdout).toMatch(/status running → completed/);
      const runId = /run (run_[0-9a-f]+) is completed/.exec(demo.stdout)?.[1];
      expect(runId, demo.stdout).toBeDefined();
      expect(existsSync(join(demoCwd, ".tether", "tether.db"))).toBe(false);
      const store = db.open();
      expect(await store.getRun(runId!)).toMatchObject({ id: runId, status: "completed" });
      expect((await store.listTokens()).map((t) => ({ role: t.role, revoked: t.revokedAt !== null }))).toEqual([{ role: "admin", revoked: true }]);
    } finally {
      await db.cleanup();
      rmSync(demoCwd, { recursive: true, force: true });
    }
  }, 70_000);

  it("say sends a message to a running run without pausing it; the agent receives it", async () => {
    const id = await startWriter("write about steering");
    const said = await cli(["say", id, "Mention the kill switch."]);
    expect(said.code, said.stderr).toBe(0);
    expect(said.stdout).toMatch(new RegExp(`^msg_\\S+ queued for ${id} \\((running|queued)\\); the agent reads it before its next model call`));
    await client.cancel(id).catch(() => undefined);
    const entries = await journal(id);
    expect(entries.filter((e) => e.type === "message.queued").map((e) => e.data.text)).toEqual(["Mention the kill switch."]);
    expect((await cli(["say", "run_missing", "hello"])).code).toBe(4);
  });

  it("the listing and views agree with the API", async () => {
    const ls = await cli(["ls", "--json", "--limit", "3"]);
    const runs = JSON.parse(ls.stdout) as RunView[];
    expect(runs.length).toBe(3);
    const fromApi = await client.list({ limit: 3 });
    expect(runs.map((r) => [r.id, r.agent])).toEqual(fromApi.map((r) => [r.id, r.agent]));
    const shown = JSON.parse((await cli(["show", runs[0].id, "--json"])).stdout) as RunView;
    const apiRun = await client.get(runs[0].id);
    expect({ id: shown.id, agent: shown.agent, input: shown.input, createdAt: shown.createdAt }).toEqual({ id: apiRun.id, agent: apiRun.agent, input: apiRun.input, createdAt: apiRun.createdAt });
  });
});
