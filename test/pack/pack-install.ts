import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file is test/pack/pack-install.ts). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "../..");

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/**
 * Packs tether-runtime as `npm pack` would publish it, without touching the repository's own
 * `dist/` (other suites read it while this one runs): the package's files are staged in a temp
 * folder, the TypeScript is compiled there, the built dashboard is copied, and the stage is packed.
 * `packageJson` replaces package.json (to measure another dependency set).
 */
export function packTarball(options: { packageJson?: string } = {}): { tarball: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "tether-pack-"));
  const stage = join(dir, "package");
  mkdirSync(stage);
  for (const name of ["package.json", "README.md", "AGENTS.md", "docs", "examples"]) {
    cpSync(join(repoRoot, name), join(stage, name), { recursive: true });
  }
  if (options.packageJson !== undefined) writeFileSync(join(stage, "package.json"), options.packageJson);
  const tsc = join(repoRoot, "node_modules/typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", join(stage, "dist")], { stdio: "pipe" });
  const dashboard = join(repoRoot, "dist/dashboard");
  if (existsSync(dashboard)) cpSync(dashboard, join(stage, "dist/dashboard"), { recursive: true });
  const packed = execFileSync(npm, ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: stage, encoding: "utf8" });
  return { tarball: join(dir, packed.trim().split("\n").pop()!), dir };
}

export interface Installed {
  /** The consumer project: an empty package with tether-runtime installed. */
  dir: string;
  ms: number;
  /** Bytes under node_modules (apparent size of every file, as `du -sb`). */
  bytes: number;
  packages: number;
}

/** An empty ES-module project, then `npm install <specs>` with the given extra flags, timed. */
export function installInto(specs: readonly string[], flags: readonly string[] = []): Installed {
  const dir = mkdtempSync(join(tmpdir(), "tether-consumer-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "tether-consumer", version: "1.0.0", private: true, type: "module" }, null, 2));
  const started = performance.now();
  const result = spawnSync(npm, ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...flags, ...specs], { cwd: dir, encoding: "utf8" });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`npm install failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  const modules = join(dir, "node_modules");
  return { dir, ms, bytes: sizeOf(modules), packages: countPackages(modules) };
}

export function sizeOf(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (entry.isSymbolicLink()) continue;
    total += entry.isDirectory() ? sizeOf(child) : statSync(child).size;
  }
  return total;
}

/** Folders with a package.json directly under a node_modules (scoped and nested ones included). */
function countPackages(modules: string): number {
  if (!existsSync(modules)) return 0;
  let count = 0;
  for (const entry of readdirSync(modules, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const path = join(modules, entry.name);
    if (entry.name.startsWith("@")) {
      for (const scoped of readdirSync(path, { withFileTypes: true })) if (scoped.isDirectory()) count += 1 + countPackages(join(path, scoped.name, "node_modules"));
    } else {
      count += 1 + countPackages(join(path, "node_modules"));
    }
  }
  return count;
}

export function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}
