/** A worker in its own process for the AI SDK drop-in test: executes runs from the SQLite file. */
import { createTether, SqliteStore } from "../../src/index.js";
import { aiSdkResearcher } from "./agent.js";

const options = JSON.parse(process.argv[2] ?? "{}") as { dbPath: string; baseURL: string; toolLogPath: string };
const store = new SqliteStore({ path: options.dbPath });
const runtime = createTether({ agents: [aiSdkResearcher(options.baseURL, options.toolLogPath)], store, workerPollMs: 20, workerId: `worker-b-${process.pid}` });

process.on("message", (message: { type?: string }) => {
  if (message?.type === "stop") {
    void (async () => {
      await runtime.close();
      await store.close();
      process.exit(0);
    })();
  }
});

runtime.startWorker();
process.send?.({ type: "ready", pid: process.pid });
