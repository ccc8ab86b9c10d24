import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Nothing in the project points at a file outside it: every Markdown file named in the code (its
 * comments end up in the published `.d.ts`), the docs, the examples and the dashboard is one the
 * repository has, so the package never cites a design note a user cannot open.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const scanned = ["src", "dashboard/src", "examples", "docs", "bench", "test", "README.md", "AGENTS.md", "CHANGELOG.md", "package.json"];
const textFile = /\.(ts|tsx|mts|js|md|json|html|css)$/;

function filesUnder(path: string): string[] {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full).flatMap((name) => (name === "node_modules" || name === "fixtures" ? [] : filesUnder(join(path, name))));
}

function mentionedMarkdown(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(/(?<![\w:/.@-])((?:\.{1,2}\/)*(?:[\w-]+\/)*[\w-]+\.md)(?![\w])/g)) names.push(match[1]);
  return names;
}

describe("references to files", () => {
  it("every Markdown file the project names exists in it", () => {
    const missing: string[] = [];
    for (const file of scanned.flatMap(filesUnder).filter((f) => textFile.test(f))) {
      for (const name of mentionedMarkdown(readFileSync(join(root, file), "utf8"))) {
        const candidates = [resolve(root, dirname(file), name), resolve(root, name), resolve(root, "docs", name)];
        if (candidates.some((c) => existsSync(c))) continue;
        missing.push(`${file}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("names no folder of the machine it was written on", () => {
    const offenders = scanned
      .flatMap(filesUnder)
      .filter((f) => textFile.test(f) && f !== "test/docs/references.test.ts")
      .filter((f) => /\/work\/(shared|main|wt)\b|\.\.\/shared\/DESIGN/.test(readFileSync(join(root, f), "utf8")));
    expect(offenders).toEqual([]);
  });
});
