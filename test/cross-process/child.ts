/**
 * Process A of the cross-process suite: a worker that executes runs from the SQLite file.
 * It reports, on request over IPC, when it streamed each model delta of a run (the wall
 * clock, which the test process shares), so the test can see when the stream really stopped.
 */
import { createTether, SqliteStore } from "../../src/index.js";
import { crossProcessAgents } from "./agents.js";

const options = JSON.parse(process.argv[2] ?? "{}") as { dbPath: string; compensationLogPath: string };
const store = new SqliteStore({ path: options.dbPath });
const runtime = createTether({ agents: crossProcessAgents(options.compensationLogPath), store, workerPollMs: 20, workerId: `worker-a-${process.pid}` });

const deltas = new Map<string, { at: number; callSeq: number }[]>();
runtime.bus.subscribeAll((event) => {
  if (event.kind !== "live") return;
  const list = deltas.get(event.runId) ?? [];
  list.push({ at: event.at, callSeq: Number(event.data.callSeq) });
  deltas.set(event.runId, list);
});

process.on("message", (message: { type?: string; runId?: string }) => {
  if (message?.type === "deltas") process.send?.({ type: "deltas", runId: message.runId, deltas: deltas.get(message.runId ?? "") ?? [] });
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
