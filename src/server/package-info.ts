import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The folder of this package's package.json, from `src/` (tsx) or from `dist/src/`. */
export function packageRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "package.json"))) return dir;
    dir = dirname(dir);
  }
  return undefined;
}

export function packageVersion(): string {
  const root = packageRoot();
  if (!root) return "0.0.0";
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version?: string };
  return manifest.version ?? "0.0.0";
}
