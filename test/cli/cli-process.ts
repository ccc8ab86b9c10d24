import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** What the CLI tests spawn: the project's `src/cli/main.ts` under tsx, as `tether` runs it. */
export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const tsxLoader = createRequire(import.meta.url).resolve("tsx");
export const mainTs = join(projectRoot, "src/cli/main.ts");
/** The arguments of `node` that run `tether …args`. */
export const tetherArgs = (args: string[]): string[] => ["--import", tsxLoader, mainTs, ...args];

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `tether …args` as a child process to its end (killed after 30 s), with exactly the environment given. */
export function runTether(args: string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, tetherArgs(args), { cwd: options.cwd ?? projectRoot, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tether ${args.join(" ")} did not finish in 30 s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 30_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? -1, stdout, stderr });
    });
  });
}
