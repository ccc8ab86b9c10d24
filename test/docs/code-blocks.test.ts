import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runnableBlocks } from "./code-blocks.js";

/**
 * Every TypeScript block in the README and the guides in docs/ runs as written (a user copies
 * them): each is saved to a fresh folder and run with tsx, `tether-runtime` resolving to this
 * checkout's sources, and all of them compile under strict TypeScript. A block that is only a piece
 * of a program says `ts fragment`.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const tscBin = join(root, "node_modules/typescript/bin/tsc");
const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const blocks = docs.flatMap((file) => runnableBlocks(join(root, file)));

const specifiers: [string, string][] = [
  ["tether-runtime/testing", "src/testing/index.ts"],
  ["tether-runtime", "src/index.ts"],
];

function localised(code: string): string {
  let out = code;
  for (const [name, path] of specifiers) out = out.replaceAll(`from "${name}"`, `from ${JSON.stringify(join(root, path))}`);
  return out;
}

describe("code blocks in the README and docs/", () => {
  it("finds the README's library example", () => {
    expect(blocks.some((b) => b.file.endsWith("README.md") && b.code.includes("createTether"))).toBe(true);
  });

  // Each way to write an agent has a guide, linked from docs/agents.md, with an example that runs.
  const guideRows = readFileSync(join(root, "docs/agents.md"), "utf8").split("\n").filter((l) => l.startsWith("|"));
  const guides = guideRows.flatMap((row) => [...row.matchAll(/\]\(([a-z0-9-]+\.md)\)/g)].map((m) => `docs/${m[1]}`));
  it("docs/agents.md links a guide for each way to write an agent", () => {
    expect(guides).toEqual(expect.arrayContaining(["docs/tool-loop.md", "docs/step-machine.md", "docs/ai-sdk.md", "docs/async-function-agents.md"]));
  });
  for (const guide of new Set(guides)) {
    it(`${guide} has a complete example that runs`, () => {
      expect(blocks.filter((b) => b.file === join(root, guide)).some((b) => b.code.includes("createTether") || b.code.includes("fromAiSdkTool"))).toBe(true);
    });
  }

  it("every block compiles under strict TypeScript, as in a user's project", () => {
    const cwd = mkdtempSync(join(tmpdir(), "tether-doc-types-"));
    try {
      symlinkSync(join(root, "node_modules"), join(cwd, "node_modules"), "dir");
      const names = new Map<string, string>();
      blocks.forEach((block, i) => {
        const name = `block${i}.mts`;
        names.set(name, `${relative(root, block.file)}:${block.line}`);
        writeFileSync(join(cwd, name), `${localised(block.code)}\nexport {};\n`);
      });
      const compilerOptions = { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2023", lib: ["es2023", "dom"], types: ["node"], noEmit: true, skipLibCheck: true, allowImportingTsExtensions: true };
      writeFileSync(join(cwd, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.mts"] }));
      const result = spawnSync(process.execPath, [tscBin, "-p", cwd], { cwd, encoding: "utf8", timeout: 120_000 });
      const report = result.stdout.replace(/block\d+\.mts/g, (name) => names.get(name) ?? name);
      expect(result.status, report.slice(0, 4000)).toBe(0);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 130_000);

  for (const block of blocks) {
    it(`${relative(root, block.file)}:${block.line} runs as written`, () => {
      const cwd = mkdtempSync(join(tmpdir(), "tether-doc-"));
      try {
        symlinkSync(join(root, "node_modules"), join(cwd, "node_modules"), "dir");
        const file = join(cwd, "example.mts");
        writeFileSync(file, localised(block.code));
        const env = { ...process.env, TETHER_URL: "", TETHER_TOKEN: "" };
        const result = spawnSync(process.execPath, ["--import", tsxLoader, file], { cwd, env, encoding: "utf8", timeout: 60_000 });
        expect(result.status, `exit ${result.status} ${result.signal ?? ""}\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-3000)}`).toBe(0);
        expect(existsSync(file)).toBe(true);
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
    }, 70_000);
  }
});
