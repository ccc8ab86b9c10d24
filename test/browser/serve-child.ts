import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Role } from "../../src/server/api-types.js";
import { createApiToken } from "../../src/server/tokens.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const mainTs = join(root, "src/cli/main.ts");

export interface ServedTether {
  url: string;
  cwd: string;
  /** Where the bundled examples keep what they make (deep-research drafts under `deep-research/`). */
  dataDir: string;
  tokens: Record<Role, { token: string; name: string }>;
  output(): string;
  stop(): Promise<void>;
}

/**
 * `tether serve --port 0` as a child process in `cwd`, with a `tether.config.ts` there that
 * registers the bundled examples (simulated model, a pace the browser can follow) and the
 * server suite's fixture agents (a tool that cannot be interrupted, a vars schema), and one
 * API token per role created in its store beforehand.
 */
export async function serveTether(cwd: string, options: { tokensPerSecond: number }): Promise<ServedTether> {
  const dataDir = join(cwd, "data");
  writeFileSync(
    join(cwd, "tether.config.ts"),
    `import { bundledAgents } from ${JSON.stringify(join(root, "examples/index.ts"))};
import { fixtureAgents } from ${JSON.stringify(join(root, "test/server/fixture-agents.ts"))};
export default [
  ...bundledAgents({ dataDir: ${JSON.stringify(dataDir)}, tokensPerSecond: ${options.tokensPerSecond} }),
  ...fixtureAgents({ tokensPerSecond: ${options.tokensPerSecond}, rounds: 40, slowMs: 4000 }),
];
`,
  );
  mkdirSync(join(cwd, ".tether"), { recursive: true });
  const store = new SqliteStore({ path: join(cwd, ".tether", "tether.db") });
  const tokens = {} as ServedTether["tokens"];
  const names: Record<Role, string> = { admin: "ada-admin", operator: "olivia-operator", viewer: "victor-viewer" };
  try {
    for (const role of ["admin", "operator", "viewer"] as const) tokens[role] = { token: (await createApiToken(store, { name: names[role], role })).token, name: names[role] };
  } finally {
    await store.close();
  }

  const env = { ...process.env };
  delete env.TETHER_URL;
  delete env.TETHER_TOKEN;
  delete env.TETHER_DB;
  const child: ChildProcess = spawn(process.execPath, ["--import", tsxLoader, mainTs, "serve", "--port", "0"], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const url = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`tether serve did not start:\n${output}`)), 30_000);
    const onData = (data: Buffer) => {
      output += data.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolvePromise(match[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`tether serve exited (${code}):\n${output}`));
    });
  });
  return {
    url,
    cwd,
    dataDir,
    tokens,
    output: () => output,
    stop: () =>
      new Promise<void>((resolvePromise) => {
        if (child.exitCode !== null) return resolvePromise();
        const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
        child.once("exit", () => {
          clearTimeout(force);
          resolvePromise();
        });
        child.kill("SIGTERM");
      }),
  };
}
