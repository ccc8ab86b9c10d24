#!/usr/bin/env node
import { runCli } from "./program.js";

const code = await runCli(process.argv);
// Exit once output is flushed, even if an idle keep-alive socket is still open.
process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
