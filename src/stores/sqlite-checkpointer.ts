import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Copies the write-ahead log into the database file from a worker thread, on its own
 * connection, so the writer never pays for it. SQLite's own automatic checkpoint runs inside
 * the commit that crosses the threshold, with two fsyncs; moved here, the commit path only
 * appends frames to the WAL (as SQLite's WAL documentation suggests for busy writers).
 *
 * PASSIVE checkpoints never block the writer or readers; a checkpoint with nothing new to copy
 * reads the WAL index and returns. The writer keeps a high automatic threshold as a backstop
 * should this thread ever stall.
 */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma("busy_timeout = 0");
const timer = setInterval(() => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch {
    // Busy or locked: the next tick tries again.
  }
}, workerData.intervalMs);
parentPort.on("message", (message) => {
  if (message !== "close") return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

const driver = createRequire(import.meta.url).resolve("better-sqlite3");

export class WalCheckpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  /** `onFailure` runs if the thread dies: the writer goes back to checkpointing itself. */
  constructor(path: string, onFailure: (error: Error) => void, intervalMs = 25) {
    this.worker = new Worker(workerSource, { eval: true, workerData: { driver, path, intervalMs } });
    this.worker.once("error", onFailure);
    // Never what keeps a process alive; a process that exits without closing loses nothing (the WAL is durable).
    this.worker.unref();
    this.exited = new Promise((resolve) => {
      this.worker.once("exit", () => resolve());
      this.worker.once("error", () => resolve());
    });
  }

  /** Stops and closes its connection, so the writer's close can checkpoint and remove the WAL. */
  async close(): Promise<void> {
    // Held while it winds down: an unreferenced thread would let the process exit mid-close.
    this.worker.ref();
    this.worker.postMessage("close");
    await this.exited;
  }
}
