/**
 * What `npm install tether-runtime` costs a new project: packs this checkout as `npm pack` would
 * publish it, installs the tarball into an empty folder (no optional peers), and prints the time,
 * the size of node_modules and the number of packages; then the time better-sqlite3 takes to
 * build its native module there (it downloads a prebuilt binary when GitHub is reachable, and
 * compiles SQLite otherwise).
 *
 *   npm run install-size                       # this checkout
 *   npm run install-size -- --baseline <ref>   # and the dependency set of package.json at a git ref
 *   npm run install-size -- --no-build         # skip the native build
 *
 * The install runs with --prefer-offline: a warm npm cache measures what the dependency set
 * costs (unpacking, linking), not the network.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { installInto, megabytes, packTarball, repoRoot, sizeOf, type Installed } from "../test/pack/pack-install.js";

const args = process.argv.slice(2);
const baselineAt = args.indexOf("--baseline");
const baseline = baselineAt === -1 ? undefined : args[baselineAt + 1];
const build = !args.includes("--no-build");

interface Measured extends Installed {
  label: string;
  buildMs?: number;
  /** node_modules after the native build (its object files stay in better-sqlite3/build). */
  builtBytes?: number;
}

function measure(label: string, packageJson?: string): Measured {
  const pack = packTarball(packageJson === undefined ? {} : { packageJson });
  try {
    const installed = installInto([pack.tarball], ["--ignore-scripts"]);
    let buildMs: number | undefined;
    let builtBytes: number | undefined;
    if (build) {
      const started = performance.now();
      const rebuilt = spawnSync("npm", ["rebuild", "better-sqlite3"], { cwd: installed.dir, encoding: "utf8" });
      if (rebuilt.status !== 0) throw new Error(`npm rebuild better-sqlite3 failed:\n${rebuilt.stderr}`);
      buildMs = performance.now() - started;
      builtBytes = sizeOf(join(installed.dir, "node_modules"));
    }
    return { ...installed, label, ...(buildMs !== undefined && builtBytes !== undefined ? { buildMs, builtBytes } : {}) };
  } finally {
    rmSync(pack.dir, { recursive: true, force: true });
  }
}

const rows: Measured[] = [];
if (baseline) rows.push(measure(`package.json at ${baseline}`, execFileSync("git", ["show", `${baseline}:package.json`], { cwd: repoRoot, encoding: "utf8" })));
rows.push(measure("this checkout"));

console.log(`npm install <tarball> into an empty project (node ${process.version}, npm ${execFileSync("npm", ["--version"], { encoding: "utf8" }).trim()}, --prefer-offline --ignore-scripts)`);
console.log(["", "install", "node_modules", "packages", ...(build ? ["better-sqlite3 build", "node_modules built"] : [])].join("\t"));
for (const row of rows) {
  console.log([row.label, `${(row.ms / 1000).toFixed(1)} s`, megabytes(row.bytes), String(row.packages), ...(row.buildMs !== undefined && row.builtBytes !== undefined ? [`${(row.buildMs / 1000).toFixed(1)} s`, megabytes(row.builtBytes)] : [])].join("\t"));
  rmSync(row.dir, { recursive: true, force: true });
}
