import type { Command } from "commander";
import { resolve } from "node:path";
import { globalsOf, info, integer, out, stopSignal, type CliIo } from "../cli-context.js";
import { checkStoreAuthState } from "../auth-state.js";
import { defaultDbPath, storeFromOptions } from "../connection.js";
import { describeLocation } from "../../stores/open-store.js";
import { maxLeaseMs } from "../../engine/lease-holder.js";
import { describeWebhooks, publicUrlOption, startWebhooks, webhookOption, webhookSettings, type WebhookFlags } from "../webhook-options.js";

/** serve (HTTP API + dashboard + worker) and worker (executes runs, no HTTP). */
export function serverCommands(program: Command, io: CliIo): void {
  program
    .command("serve")
    .description(`serve the HTTP API and the dashboard, and execute runs (store: --database-url, or --db, default ${defaultDbPath}; agents: tether.config.ts, --agents, or the bundled examples)`)
    .option("--host <host>", "address to bind; beyond loopback an API token must exist", "127.0.0.1")
    .option("--port <port>", "port (0 for any free port)", integer("--port"), 4317)
    .option("--open", "serve without API tokens: anyone on this machine may control runs (loopback only)")
    .option("--allowed-host <host...>", "other names this server is reached by (host[:port]); requests naming any other host are refused")
    .addOption(webhookOption())
    .addOption(publicUrlOption())
    .option("--concurrency <n>", "runs this process executes at once; more wait in the store", integer("--concurrency", 1))
    .option("--lease-ms <ms>", "how long a run stays this worker's without a renewal (another worker takes it over after)", integer("--lease-ms", 1000, maxLeaseMs))
    .action(async function serve(this: Command, flags: { host: string; port: number; open?: boolean; allowedHost?: string[] } & WebhookFlags & WorkerFlags) {
      const globals = globalsOf(this);
      const webhooks = webhookSettings(flags);
      const location = storeFromOptions(globals, defaultDbPath)!;
      const { loadAgents } = await import("../agents-loader.js");
      const { executingRuntime, describeAgents } = await import("../local-runtime.js");
      const { startServer } = await import("../../server/serve.js");
      const { defaultDashboardDir } = await import("../../server/dashboard-static.js");
      const loaded = await loadAgents({ cwd: process.cwd(), module: globals.agents, dataDir: resolve(".tether") });
      const { runtime, store } = await executingRuntime(location, loaded, workerSettings(flags));
      let server;
      let notifier;
      try {
        await checkStoreAuthState(location, store);
        const publicHost = flags.publicUrl ? [new URL(flags.publicUrl).host] : [];
        server = await startServer({ runtime, host: flags.host, port: flags.port, auth: flags.open ? { mode: "open" } : { mode: "tokens" }, allowedHosts: [...publicHost, ...(flags.allowedHost ?? [])], agentSource: loaded.origin });
        notifier = webhooks && startWebhooks(runtime, webhooks, server.url);
      } catch (error) {
        await server?.close();
        await runtime.close();
        await store.close();
        throw error;
      }
      const tokens = (await store.listTokens()).filter((t) => t.revokedAt === null).length;
      out(io, `Tether listening on ${server.url}`);
      info(io, `store: ${describeLocation(location)}`);
      info(io, `agents: ${describeAgents(loaded)}`);
      info(io, `dashboard: ${defaultDashboardDir() ? server.url : "not built (npm run build); the API is at /api/v1"}`);
      info(io, flags.open ? "auth: OPEN (--open): no token needed; anyone on this machine can start, pause, cancel and halt runs" : `auth: ${tokens} API token${tokens === 1 ? "" : "s"}`);
      if (webhooks) info(io, describeWebhooks(webhooks));
      const signal = await stopSignal();
      info(io, `${signal}: stopping; the runs executed here are let go, and continue from their state in the next worker at once`);
      await notifier?.stop();
      await server.close();
      await runtime.close({ releaseLeases: true });
      await store.close();
    });

  program
    .command("worker")
    .description(`execute runs from the store (--database-url, or --db, default ${defaultDbPath}) without serving HTTP; start as many as you like on one database`)
    .addOption(webhookOption())
    .addOption(publicUrlOption())
    .option("--concurrency <n>", "runs this worker executes at once; more wait in the store for any worker", integer("--concurrency", 1))
    .option("--lease-ms <ms>", "how long a run stays this worker's without a renewal (another worker takes it over after)", integer("--lease-ms", 1000, maxLeaseMs))
    .action(async function worker(this: Command, flags: WebhookFlags & WorkerFlags) {
      const globals = globalsOf(this);
      const webhooks = webhookSettings(flags);
      const location = storeFromOptions(globals, defaultDbPath)!;
      const { loadAgents } = await import("../agents-loader.js");
      const { executingRuntime, describeAgents } = await import("../local-runtime.js");
      const loaded = await loadAgents({ cwd: process.cwd(), module: globals.agents, dataDir: resolve(".tether") });
      const { runtime, store } = await executingRuntime(location, loaded, workerSettings(flags));
      // Links in a notice point at the server the CLI talks to (--url), unless --public-url says otherwise.
      const notifier = webhooks && startWebhooks(runtime, webhooks, globals.url);
      out(io, `Tether worker ${runtime.workerId} executing runs from ${describeLocation(location)} (at most ${runtime.concurrency} at once, lease ${runtime.leaseMs} ms)`);
      info(io, `agents: ${describeAgents(loaded)}`);
      if (webhooks) info(io, describeWebhooks(webhooks));
      const signal = await stopSignal();
      info(io, `${signal}: stopping; the runs executed here are let go, and continue from their state in the next worker at once`);
      await notifier?.stop();
      await runtime.close({ releaseLeases: true });
      await store.close();
    });
}

interface WorkerFlags {
  concurrency?: number;
  leaseMs?: number;
}

function workerSettings(flags: WorkerFlags): { concurrency?: number; leaseMs?: number } {
  return { ...(flags.concurrency === undefined ? {} : { concurrency: flags.concurrency }), ...(flags.leaseMs === undefined ? {} : { leaseMs: flags.leaseMs }) };
}
