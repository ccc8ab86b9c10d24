import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const here = dirname(fileURLToPath(import.meta.url));
const tsxLoader = createRequire(import.meta.url).resolve("tsx");

describe("createTether", () => {
  it("close() closes the SQLite store it opened, so the process exits after runs that wrote enough to start the checkpoint thread", () => {
    const dir = mkdtempSync(join(tmpdir(), "tether-close-"));
    try {
      symlinkSync(join(here, "../node_modules"), join(dir, "node_modules"), "dir");
      const script = join(dir, "program.mts");
      writeFileSync(
        script,
        `import { z } from "zod";
import { createTether, defineAgent, tool } from ${JSON.stringify(join(here, "index.ts"))};
const noop = tool({ name: "noop", description: "n", input: z.object({ i: z.number() }), execute: async ({ i }) => i });
const agent = defineAgent({
  name: "steps", version: "1", tools: [noop], budgets: { maxSteps: 10_000 },
  init: () => ({ messages: [], vars: { i: 0 } }),
  next: (state) => (Number(state.vars.i) < 1500 ? { type: "tool", toolCallId: "c" + String(state.vars.i), toolName: "noop", input: { i: Number(state.vars.i) } } : { type: "done", output: null }),
  apply: (state) => void (state.vars = { i: Number(state.vars.i) + 1 }),
});
const tether = createTether({ agents: [agent], dir: ${JSON.stringify(join(dir, "store"))}, tracing: false });
const run = await tether.start("steps", null);
const done = await tether.waitFor(run.id, ["completed", "paused"], { timeoutMs: 60_000 });
await tether.close();
console.log(done.status);
`,
      );
      const result = spawnSync(process.execPath, ["--import", tsxLoader, script], { cwd: dir, encoding: "utf8", timeout: 60_000 });
      expect(result.stderr).toBe("");
      expect(result.stdout.trim()).toBe("completed");
      expect(result.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 70_000);
});
