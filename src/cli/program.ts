import { Command, CommanderError, Option } from "commander";
import { packageVersion } from "../server/package-info.js";
import type { CliIo } from "./cli-context.js";
import { controlCommands } from "./commands/control-commands.js";
import { demoCommand } from "./commands/demo-command.js";
import { haltCommands } from "./commands/halt-commands.js";
import { runCommands } from "./commands/run-commands.js";
import { serverCommands } from "./commands/server-commands.js";
import { tokenCommands } from "./commands/token-commands.js";
import { verifyCommand } from "./commands/verify-command.js";
import { defaultUrl } from "./connection.js";
import { errorJson, errorLine, exitCode, exitCodeFor, UsageError } from "./exit-codes.js";

export function buildProgram(io: CliIo, options: { jsonErrors?: boolean; held?: string[] } = {}): Command {
  const program = new Command("tether")
    .description("Pause, resume and cancel long-running AI agents.")
    .version(packageVersion(), "-V, --version")
    .addOption(new Option("--url <url>", "the Tether server").env("TETHER_URL").default(defaultUrl))
    .addOption(new Option("--token <token>", "API token").env("TETHER_TOKEN"))
    .addOption(new Option("--db <path>", "work straight on this SQLite store instead of a server (serve/worker/token: the store to use)").env("TETHER_DB"))
    .addOption(new Option("--database-url <url>", "work straight on this PostgreSQL database (postgres://…; ?schema=name, default tether) instead of a server or SQLite").env("TETHER_DATABASE_URL"))
    .option("--agents <module>", "load agents from this module instead of tether.config.ts")
    .option("--json", "print JSON (read commands; an error as {\"error\":{code,message}})")
    .configureOutput({
      // A mistake in the call is reported by runCli as one line, as every other error.
      outputError: () => undefined,
      writeOut: (text) => io.stdout.write(text),
      // With --json a mistake in the call is reported as JSON (runCli), not as commander's text;
      // the text is held, and written after all when it was help (a command given no subcommand).
      writeErr: (text) => {
        if (options.jsonErrors) options.held?.push(text);
        else io.stderr.write(text);
      },
    })
    .exitOverride();
  runCommands(program, io);
  controlCommands(program, io);
  haltCommands(program, io);
  tokenCommands(program, io);
  serverCommands(program, io);
  demoCommand(program, io);
  verifyCommand(program, io);
  program.addHelpText(
    "after",
    `
Exit codes: 0 ok, 1 error, 2 usage, 3 illegal transition or stale, 4 not found, 5 damaged store.
Docs: docs/cli.md`,
  );
  return program;
}

/** Runs the CLI and returns its exit code. With `--json`, an error is one line of JSON on stderr: `{"error":{"code","message","hint"?}}`. */
export async function runCli(argv: readonly string[], io: CliIo = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin }): Promise<number> {
  const args = argv.slice(2);
  const end = args.indexOf("--");
  const json = (end === -1 ? args : args.slice(0, end)).includes("--json");
  const held: string[] = [];
  const program = buildProgram(io, { jsonErrors: json, held });
  try {
    await program.parseAsync([...argv]);
    return exitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version" || error.code === "commander.help") {
        for (const text of held) io.stderr.write(text);
        return exitCode.ok;
      }
      const command = program.commands.find((c) => args.includes(c.name()));
      const help = `\`tether ${command ? `${command.name()} ` : ""}--help\``;
      const usage = new UsageError(error.message.replace(/^error: /, "").trim(), `see ${help}`);
      io.stderr.write(`${json ? errorJson(usage) : errorLine(usage)}\n`);
      return exitCode.usage;
    }
    io.stderr.write(`${json ? errorJson(error) : errorLine(error)}\n`);
    return exitCodeFor(error);
  }
}
