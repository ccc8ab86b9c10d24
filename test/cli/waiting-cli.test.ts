import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JournalEntry } from "../../src/engine/store.js";
import type { RunWaitingPayload } from "../../src/notify/webhook-payload.js";
import { verifyWebhookSignature } from "../../src/notify/webhook-signature.js";
import { runTether, type CliResult, projectRoot, tsxLoader, mainTs } from "./cli-process.js";

/**
 * `tether worker --webhook` tells a real receiver on loopback when a run starts waiting for a
 * person, and `tether ls --waiting` lists those runs, oldest wait first: both as child
 * processes over one SQLite store, as a user would run them.
 */

const root = projectRoot;
const fixtureAgentsPath = join(root, "test/server/fixture-agents.ts");
const secret = "cli-test-secret-0123456789abcdef";

const cleanEnv = () => {
  const env = { ...process.env };
  for (const name of ["TETHER_URL", "TETHER_TOKEN", "TETHER_DB", "TETHER_WEBHOOK_SECRET", "TETHER_PUBLIC_URL"]) delete env[name];
  return env;
};

function tether(cwd: string, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runTether(args, { cwd, env: { ...cleanEnv(), ...env } });
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

describe("tether worker --webhook, tether ls --waiting", () => {
  let cwd: string;
  let db: string;
  let receiver: Server;
  let hookUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];

  beforeAll(async () => {
    cwd = mkdtempSync(join(tmpdir(), "tether-waiting-cli-"));
    db = join(cwd, "w.db");
    writeFileSync(join(cwd, "tether.config.ts"), `import { fixtureAgents } from ${JSON.stringify(fixtureAgentsPath)};\nexport default fixtureAgents({ tokensPerSecond: 400, rounds: 12, slowMs: 8000 });\n`);
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (c: Buffer) => chunks.push(c));
      request.on("end", () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") });
        response.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/tether`;
  });

  afterAll(async () => {
    await new Promise((r) => receiver?.close(r));
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  it("the worker tells the receiver once per wait, signed; ls --waiting lists the waiting runs oldest first with why and for how long", async () => {
    const worker: ChildProcess = spawn(process.execPath, ["--import", tsxLoader, mainTs, "--db", db, "worker", "--webhook", hookUrl, "--public-url", "https://tether.example.com"], {
      cwd,
      env: { ...cleanEnv(), TETHER_WEBHOOK_SECRET: secret },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let banner = "";
    worker.stdout!.on("data", (d: Buffer) => (banner += d.toString()));
    worker.stderr!.on("data", (d: Buffer) => (banner += d.toString()));
    try {
      await until("the worker banner", () => banner.includes(`webhooks: ${new URL(hookUrl).origin}`));
      const start = async (args: string[]) => {
        const started = await tether(cwd, ["--db", db, "start", ...args]);
        expect(started.code, started.stderr).toBe(0);
        return started.stdout.trim();
      };
      const older = await start(["writer", "first", "--max-steps", "2"]);
      await until("the first notice", () => received.length === 1);
      const newer = await start(["writer", "second", "--max-steps", "3"]);
      await until("the second notice", () => received.length === 2);
      // Paused by a person (pausing until its slow tool call ends): nobody is told, and it is not in the waiting list.
      const byHand = await start(["slow", "wait"]);
      const paused = await tether(cwd, ["--db", db, "pause", byHand]);
      expect(paused.code, paused.stderr).toBe(0);

      const bodies = received.map((r) => JSON.parse(r.body) as RunWaitingPayload);
      expect(bodies.map((b) => [b.run.id, b.reason])).toEqual([
        [older, "budget_steps"],
        [newer, "budget_steps"],
      ]);
      for (const r of received) expect(verifyWebhookSignature({ body: r.body, header: r.headers["tether-signature"] as string, secret }).valid).toBe(true);
      expect(bodies[0].links.dashboard).toBe(`https://tether.example.com/runs/${older}`);

      const listed = await tether(cwd, ["--db", db, "ls", "--waiting"]);
      expect(listed.code, listed.stderr).toBe(0);
      const lines = listed.stdout.trim().split("\n");
      expect(lines[0]).toMatch(/^RUN\s+AGENT\s+REASON\s+WAITING\s+DETAIL$/);
      expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3))).toEqual([
        [older, "writer", "budget_steps"],
        [newer, "writer", "budget_steps"],
      ]);
      expect(lines[1]).toContain("budget_steps: 2 of 2 steps");
      const json = JSON.parse((await tether(cwd, ["--db", db, "ls", "--waiting", "--json"])).stdout) as { id: string; waiting: { reason: string; since: number } }[];
      expect(json.map((r) => r.id)).toEqual([older, newer]);
      expect(json[0].waiting.since).toBeLessThanOrEqual(json[1].waiting.since);

      const logs = await tether(cwd, ["--db", db, "logs", older, "--json"]);
      const entries = logs.stdout.trim().split("\n").map((l) => JSON.parse(l) as JournalEntry);
      expect(entries.filter((e) => e.type === "webhook.delivery").map((e) => [e.data.outcome, e.data.status])).toEqual([["delivered", 200]]);
    } finally {
      const exited = new Promise<number | null>((r) => worker.once("exit", (code) => r(code)));
      worker.kill("SIGINT");
      expect(await exited).toBe(0);
    }
    expect(received).toHaveLength(2);
  }, 60_000);

  it("refuses --webhook without a secret, and --waiting with --status, as usage errors that say what to do", async () => {
    const noSecret = await tether(cwd, ["--db", db, "worker", "--webhook", hookUrl]);
    expect(noSecret.code).toBe(2);
    expect(noSecret.stderr).toContain("set TETHER_WEBHOOK_SECRET");
    const both = await tether(cwd, ["--db", db, "ls", "--waiting", "--status", "paused"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("leave out --status");
  });
});
