import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: string | undefined;

/**
 * The package's root folder, found by walking up to its package.json, so fixture folders
 * (`examples/<name>/corpus`, …) resolve the same from `examples/*.ts` and `dist/examples/*.js`.
 */
export function packageRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "tether-runtime") {
      cached = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the tether-runtime package root above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** A file or folder shipped with the examples, e.g. `exampleAsset("deep-research", "corpus")`. */
export function exampleAsset(...parts: string[]): string {
  return join(packageRoot(), "examples", ...parts);
}
