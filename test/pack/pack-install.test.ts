import { execFileSync, spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optionalPeers } from "../../src/engine/optional-import.js";
import { installInto, packTarball, repoRoot, type Installed } from "./pack-install.js";

/**
 * What a new user gets from `npm install tether-runtime`: the tarball `npm pack` makes, installed
 * into an empty project without any optional peer. The CLI and the core work, the published
 * types compile in a strict project without skipLibCheck, and a feature that needs a missing
 * peer says which package to install.
 *
 * better-sqlite3's native build is copied from this repository's (the same version, built for
 * this Node) instead of compiled again: that build is better-sqlite3's own business and takes
 * minutes; `npm run install-size` measures a real install.
 */

const repoPackage = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

let pack: { tarball: string; dir: string };
let consumer: Installed;
let bin: string;

function run(args: string[], options: { cwd?: string; timeout?: number } = {}): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, args, { cwd: options.cwd ?? consumer.dir, encoding: "utf8", timeout: options.timeout ?? 60_000, stdio: ["ignore", "pipe", "pipe"] });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

beforeAll(() => {
  pack = packTarball();
  consumer = installInto([pack.tarball, `@types/node@${repoPackage.devDependencies["@types/node"]}`], ["--omit=optional", "--omit=peer", "--ignore-scripts"]);
  const installedSqlite = join(consumer.dir, "node_modules/better-sqlite3");
  const version = (JSON.parse(readFileSync(join(installedSqlite, "package.json"), "utf8")) as { version: string }).version;
  const built = join(repoRoot, "node_modules/better-sqlite3/build/Release/better_sqlite3.node");
  if (version === repoPackage.dependencies["better-sqlite3"] && existsSync(built)) {
    mkdirSync(join(installedSqlite, "build/Release"), { recursive: true });
    copyFileSync(built, join(installedSqlite, "build/Release/better_sqlite3.node"));
  } else {
    execFileSync("npm", ["rebuild", "better-sqlite3"], { cwd: consumer.dir, stdio: "ignore" });
  }
  bin = join(consumer.dir, "node_modules/tether-runtime/dist/src/cli/main.js");
}, 180_000);

afterAll(() => {
  if (consumer) rmSync(consumer.dir, { recursive: true, force: true });
  if (pack) rmSync(pack.dir, { recursive: true, force: true });
});

describe("package.json", () => {
  it("declares each optional peer as optional, pins it exactly for our own tests, and optionalImport knows the same ranges", () => {
    expect(repoPackage.peerDependencies).toEqual(optionalPeers);
    for (const name of Object.keys(optionalPeers)) {
      expect(repoPackage.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(repoPackage.dependencies[name], name).toBeUndefined();
      expect(repoPackage.devDependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/);
    }
  });
});

describe("the packed tarball installed into an empty project without optional peers", () => {
  it("installs only the core: none of the optional peers, no TypeScript loader, no browser driver", () => {
    for (const name of [...Object.keys(optionalPeers), "@ai-sdk/provider", "@opentelemetry/sdk-trace-base", "esbuild", "typescript"]) {
      expect(existsSync(join(consumer.dir, "node_modules", name)), `${name} is installed`).toBe(false);
    }
    for (const name of Object.keys(repoPackage.dependencies)) expect(existsSync(join(consumer.dir, "node_modules", name)), name).toBe(true);
  });

  it("tether --help lists the commands", () => {
    const help = run([join(consumer.dir, "node_modules/.bin/tether"), "--help"]);
    expect(help.stderr).toBe("");
    expect(help.code).toBe(0);
    for (const command of ["demo", "serve", "start", "pause", "resume", "cancel"]) expect(help.stdout).toContain(command);
  });

  it("tether demo runs the deep-research example on SQLite with the simulated model to completed", () => {
    const dir = join(consumer.dir, "demo");
    mkdirSync(dir);
    const demo = run([bin, "demo", "--port", "0", "--speed", "5000", "--exit-when-done", "--no-attach"], { cwd: dir, timeout: 90_000 });
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout).toContain("Tether demo: deep-research is working on");
    expect(demo.stdout).toMatch(/dashboard: http:\/\/127\.0\.0\.1:\d+\/#token=/);
    expect(demo.stdout).toContain("status running → completed");
    expect(demo.stdout).toMatch(/run run_\w+ is completed\n$/);
    expect(existsSync(join(dir, ".tether/tether.db"))).toBe(true);
  }, 120_000);

  it("tether serve answers its health check, with the bundled examples and no optional peer", async () => {
    const dir = join(consumer.dir, "serve");
    mkdirSync(dir);
    const started = performance.now();
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--open"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let stdout = "";
        child.stdout.on("data", (d: Buffer) => {
          stdout += d.toString();
          const match = /Tether listening on (http:\/\/\S+)/.exec(stdout);
          if (match) resolve(match[1]);
        });
        child.once("exit", (code) => reject(new Error(`tether serve exited with ${code}: ${stderr}`)));
      });
      const health = (await (await fetch(`${url}/api/v1/healthz`)).json()) as { ok: boolean; store: string };
      const firstAnswerMs = performance.now() - started;
      expect(health).toMatchObject({ ok: true, store: "sqlite" });
      expect(stderr).toContain("agents: ");
      // The target is under a second; on a loaded CI machine allow more.
      expect(firstAnswerMs).toBeLessThan(10_000);
    } finally {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("close", resolve));
    }
  }, 30_000);

  it("a run goes to completed through the library API (createTether, SQLite, the simulated model)", () => {
    writeFileSync(
      join(consumer.dir, "library.mjs"),
      `import { createTether, toolLoopAgent, tool } from "tether-runtime";
import { z } from "zod";
const echo = tool({ name: "echo", description: "Echo", input: z.object({ text: z.string() }), execute: async ({ text }) => ({ text }) });
const tether = createTether({ agents: [toolLoopAgent({ name: "writer", tools: [echo], model: "simulated:sim-1?tps=5000" })], dir: "lib-store" });
const run = await tether.start("writer", "Say hello");
const done = await tether.waitFor(run.id, ["completed", "paused", "cancelled"], { timeoutMs: 20000 });
console.log(done.status);
await tether.close();
`,
    );
    const library = run(["library.mjs"]);
    expect(library.stderr).toBe("");
    expect(library.stdout.trim()).toBe("completed");
  });

  it("a strict TypeScript project (skipLibCheck false) compiles against the published types", () => {
    const project = join(consumer.dir, "ts");
    mkdirSync(project);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, skipLibCheck: false, noEmit: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", types: ["node"] }, include: ["*.ts"] }),
    );
    writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(project, "consumer.ts"),
      `import { z } from "zod";
import { createTether, tool, toolLoopAgent, SqliteStore, aiSdkModel, mcpTools, fromAiSdkTool, traceRuns, TetherError, type RunRecord, type TetherModel, type McpToolInfo, type RunTracingOptions } from "tether-runtime";
import { Ledger } from "tether-runtime/testing";

const drafts = new Map<string, string>();
const writeDraft = tool({
  name: "write_draft",
  description: "Save a draft",
  input: z.object({ body: z.string() }),
  execute: async ({ body }, { idempotencyKey }) => {
    drafts.set(idempotencyKey, body);
    return { id: idempotencyKey };
  },
  compensate: async (_input, draft) => void drafts.delete(draft.id),
});
const agent = toolLoopAgent({ name: "writer", tools: [writeDraft], model: "simulated" });
const store: SqliteStore = new SqliteStore({ path: ":memory:" });
const tether = createTether({ agents: [agent], store });
export async function main(): Promise<RunRecord> {
  const run = await tether.start("writer", "Write");
  await tether.pause(run.id, { actor: "me", reason: "look", wait: true });
  return tether.waitFor(run.id, ["paused"]);
}
export const optional: [typeof aiSdkModel, typeof mcpTools, typeof fromAiSdkTool, typeof traceRuns, McpToolInfo | undefined, TetherModel | undefined, RunTracingOptions] = [aiSdkModel, mcpTools, fromAiSdkTool, traceRuns, undefined, undefined, { captureContent: false }];
export const isTetherError = (e: unknown): boolean => TetherError.isInstance(e) && e.code === "missing_dependency";
export const ledger = Ledger;
`,
    );
    const tsc = run([join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", project], { cwd: project });
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.code).toBe(0);
  }, 60_000);

  it("a feature whose optional peer is missing fails with missing_dependency and the npm install to run", () => {
    writeFileSync(
      join(consumer.dir, "missing.mjs"),
      `import { createTether, toolLoopAgent, mcpTools, fromAiSdkTool, traceRuns } from "tether-runtime";
const report = (error) => ({ code: error.code, message: error.message, install: error.details?.install });
const out = {};
const tether = createTether({ agents: [toolLoopAgent({ name: "a", tools: [] })], dir: "missing-store" });
try { await tether.start("a", "hi", { model: "openai:gpt-4o-mini" }); out.provider = "started"; } catch (e) { out.provider = report(e); }
try { traceRuns(tether); out.tracing = "traced"; } catch (e) { out.tracing = report(e); }
await tether.close();
try { await mcpTools({ type: "stdio", command: "true" }); out.mcp = "connected"; } catch (e) { out.mcp = report(e); }
try { fromAiSdkTool("t", { inputSchema: { type: "object" }, execute: async () => 1 }); out.aiTool = "wrapped"; } catch (e) { out.aiTool = report(e); }
console.log(JSON.stringify(out));
`,
    );
    const missing = run(["missing.mjs"]);
    expect(missing.stderr).toBe("");
    const out = JSON.parse(missing.stdout) as Record<string, { code: string; message: string; install: string }>;
    expect(out.provider).toMatchObject({ code: "missing_dependency", install: "npm install @ai-sdk/openai@3" });
    expect(out.provider.message).toContain('the model "openai:gpt-4o-mini" needs the package @ai-sdk/openai');
    expect(out.mcp).toMatchObject({ code: "missing_dependency", install: "npm install @modelcontextprotocol/sdk@1" });
    expect(out.aiTool).toMatchObject({ code: "missing_dependency", install: "npm install ai@6" });
    expect(out.tracing).toMatchObject({ code: "missing_dependency", install: "npm install @opentelemetry/api@1" });
  });

  // Node 22.18+ and 23.6+ strip TypeScript types themselves: there a config loads without tsx.
  const nativeTypeScript = Boolean((process.features as { typescript?: unknown }).typescript);

  it.skipIf(nativeTypeScript)("a TypeScript config without tsx is refused with missing_dependency and the npm install (a Node that cannot strip types)", () => {
    const dir = join(consumer.dir, "ts-config");
    mkdirSync(dir);
    writeFileSync(join(dir, "tether.config.ts"), "export default [];\n");
    const serve = run([bin, "serve", "--port", "0", "--open"], { cwd: dir });
    expect(serve.code).not.toBe(0);
    expect(serve.stderr).toContain("loading the TypeScript file");
    expect(serve.stderr).toContain("npm install tsx@4");
  });

  it.runIf(nativeTypeScript)("a TypeScript config loads without tsx on a Node that strips types itself", () => {
    const dir = join(consumer.dir, "ts-config-native");
    mkdirSync(dir);
    writeFileSync(join(dir, "tether.config.ts"), "const agents: unknown[] = [];\nexport default agents;\n");
    // serve keeps running once it has loaded the config: stopped after a few seconds.
    const serve = run([bin, "serve", "--port", "0", "--open"], { cwd: dir, timeout: 8_000 });
    expect(serve.stderr).not.toContain("missing_dependency");
    expect(serve.stdout + serve.stderr).toContain("(from tether.config.ts)");
  });
});

// Keeps the helper's folder layout honest: the tarball is where packTarball says.
describe("packTarball", () => {
  it("leaves a tarball beside its stage", () => {
    expect(existsSync(pack.tarball)).toBe(true);
    expect(dirname(pack.tarball)).toBe(pack.dir);
  });
});
