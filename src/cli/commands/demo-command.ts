import type { Command } from "commander";
import { resolve } from "node:path";
import { TetherClient } from "../../client/tether-client.js";
import { createApiToken } from "../../server/tokens.js";
import { attach, followLogs } from "../attach.js";
import { recordStoreAuthState } from "../auth-state.js";
import { globalsOf, info, integer, out, positiveNumber, stopSignal, type CliIo } from "../cli-context.js";
import { storeFromOptions } from "../connection.js";

const sampleQuestion = "What are the trade-offs between pausing and cancelling a long-running AI agent, and how should side effects be undone?";

/** The whole thing in one command: server, dashboard, a deep-research run, and the terminal attached to it. */
export function demoCommand(program: Command, io: CliIo): void {
  program
    .command("demo")
    .description("start a server with the embedded store (.tether/, or --database-url) and the simulated model, start the deep-research example, print the dashboard URL, and attach to the run")
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--port <port>", "port (0 for any free port)", integer("--port"), 4317)
    .option("--question <text>", "what the deep-research agent looks into (default: the example's own question)")
    .option("--speed <tokens-per-second>", "how fast the simulated model streams", positiveNumber("--speed"), 40)
    .option("--no-attach", "print the run's log instead of attaching")
    .option("--exit-when-done", "stop the server and exit once the run ends")
    .action(async function demo(this: Command, flags: { host: string; port: number; question?: string; speed: number; attach: boolean; exitWhenDone?: boolean }) {
      const dir = resolve(".tether");
      // The embedded store in .tether/, unless --database-url (or --db) names another.
      const location = storeFromOptions(globalsOf(this), resolve(dir, "tether.db"))!;
      const { loadBundledAgents } = await import("../agents-loader.js");
      const { executingRuntime, describeAgents } = await import("../local-runtime.js");
      const { startServer } = await import("../../server/serve.js");
      const { defaultDashboardDir } = await import("../../server/dashboard-static.js");
      const loaded = await loadBundledAgents({ dataDir: resolve(dir, "examples"), tokensPerSecond: flags.speed });
      const { runtime, store } = await executingRuntime(location, loaded);
      const stopping = stopSignal();
      let server: Awaited<ReturnType<typeof startServer>> | undefined;
      let demoToken: string | undefined;
      try {
        const { token, record } = await createApiToken(store, { name: `demo-${new Date().toISOString().slice(0, 19)}`, role: "admin" });
        demoToken = record.id;
        await recordStoreAuthState(location, store);
        server = await startServer({ runtime, host: flags.host, port: flags.port });
        const client = new TetherClient({ baseUrl: server.url, token });
        const agent = loaded.agents.find((a) => a.name === "deep-research") ?? loaded.agents[0];
        const question = flags.question ?? loaded.tasks?.[agent.name] ?? sampleQuestion;
        const run = await client.start(agent.name, question);
        out(io, `Tether demo: ${agent.name} is working on "${question}"`);
        out(io, `dashboard: ${server.url}/#token=${token}${defaultDashboardDir() ? "" : "  (not built: npm run build)"}`);
        out(io, `token:     ${token}  (admin, until the demo stops; also for the CLI: TETHER_URL=${server.url} TETHER_TOKEN=<token> tether ls)`);
        out(io, `run:       ${run.id}  (agents: ${describeAgents(loaded)})`);
        const interactive = io.stdin.isTTY === true && flags.attach;
        const ended = (async () => {
          if (interactive) await attach(client, run.id, { input: io.stdin, output: io.stdout });
          else await followLogs(client, run.id, (t) => io.stdout.write(t));
        })();
        await Promise.race([ended, stopping]);
        const final = await client.get(run.id);
        if (flags.exitWhenDone || !io.stdin.isTTY) {
          out(io, `run ${run.id} is ${final.status}`);
          return;
        }
        info(io, `the server is still running at ${server.url} (the dashboard works); Ctrl-C to stop`);
        await stopping;
      } finally {
        // The demo's admin token lives as long as the demo: it is revoked first thing when the demo
        // stops, so an address with the token copied out of the terminal opens nothing afterwards.
        if (demoToken) {
          await store
            .revokeToken(demoToken, Date.now())
            .then(() => recordStoreAuthState(location, store))
            .catch(() => undefined);
        }
        await server?.close();
        await runtime.close();
        await store.close();
      }
    });
}
