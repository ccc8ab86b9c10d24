import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The CI slice of `npm run load` (bench/load.ts): runs over HTTP with SSE subscribers following
 * them and pauses and resumes sent under that load. What it asserts is what a user sees (every run
 * completed, every subscriber got every journal entry once, every control command answered);
 * the latencies it prints are figures, not thresholds.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const cwd = mkdtempSync(join(tmpdir(), "tether-load-ci-"));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

interface LoadResult {
  runs: number;
  subscribers: number;
  completed: number;
  control: { samples: number; errors: number };
  sseLag: { samples: number };
  subscribersWithAGapOrDuplicate: number;
}

describe("load (CI slice of npm run load)", () => {
  it("60 runs, 20 SSE subscribers, pauses and resumes under load: all complete, no subscriber misses or repeats an entry, no control error", async () => {
    const env = { ...process.env, LOAD_RUNS: "60", LOAD_SUBSCRIBERS: "20", LOAD_ROUNDS: "3", LOAD_CONTROL_MS: "50" };
    // The results file goes to the temporary cwd, not the project.
    const child = spawn(process.execPath, ["--import", tsxLoader, join(root, "bench/load.ts")], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((done) => child.once("close", done));
    console.info(output.trim());
    expect(code, output).toBe(0);
    const result = JSON.parse(readFileSync(join(cwd, "bench-results-load.json"), "utf8")) as LoadResult;
    expect(result).toMatchObject({ runs: 60, subscribers: 20, completed: 60, subscribersWithAGapOrDuplicate: 0 });
    expect(result.control.errors).toBe(0);
    // Not vacuous: pauses were sent under load and the subscribers received entries.
    expect(result.control.samples).toBeGreaterThan(0);
    expect(result.sseLag.samples).toBeGreaterThan(0);
  }, 240_000);
});
