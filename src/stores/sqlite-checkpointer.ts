import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Copies write-ahead logs into their database files from one worker thread per process, on
 * its own connections, so a writer never pays for it. SQLite's automatic checkpoint runs inside
 * the commit that crosses its threshold, with two fsyncs; moved here, the commit path only
 * appends frames to the WAL (as SQLite's WAL documentation suggests for busy writers).
 *
 * PASSIVE checkpoints never block the writer or readers; one with nothing new to copy reads
 * the WAL index and returns. A writer that never pauses never lets them copy everything, so the
 * store bounds its WAL (see `walBoundBytes` in sqlite-store.ts). The thread is started once, by the first store that writes
 * enough to need it, and shared by every store the process opens after (starting a thread
 * costs tens of milliseconds); it never keeps the process alive.
 */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const connections = new Map();
let timer;
function tick() {
  for (const db of connections.values()) {
    try {
      db.pragma("wal_checkpoint(PASSIVE)");
    } catch {
      // Busy or locked: the next tick tries again.
    }
  }
}
parentPort.on("message", (message) => {
  if (message.op === "open") {
    try {
      const db = new Database(message.path, { fileMustExist: true });
      db.pragma("busy_timeout = 0");
      connections.set(message.id, db);
      timer ??= setInterval(tick, workerData.intervalMs);
    } catch (error) {
      parentPort.postMessage({ op: "failed", id: message.id, error: String(error) });
    }
  } else if (message.op === "close") {
    const db = connections.get(message.id);
    connections.delete(message.id);
    try {
      db?.close();
    } catch {
      // Closing is best effort; the writer's own close checkpoints what is left.
    }
    if (connections.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
    parentPort.postMessage({ op: "closed", id: message.id });
  }
});
`;

const driver = createRequire(import.meta.url).resolve("better-sqlite3");
const intervalMs = 25;

interface Registration {
  onFailure(error: Error): void;
  closed?: () => void;
}

class CheckpointerThread {
  private worker: Worker | undefined;
  private readonly registrations = new Map<number, Registration>();
  private nextId = 1;
  private closing = 0;

  register(path: string, onFailure: (error: Error) => void): number {
    const id = this.nextId++;
    this.registrations.set(id, { onFailure });
    this.thread().postMessage({ op: "open", id, path });
    return id;
  }

  /** Resolves once the thread has closed its connection to the file (or is gone). */
  unregister(id: number): Promise<void> {
    const registration = this.registrations.get(id);
    const worker = this.worker;
    if (!registration || !worker) {
      this.registrations.delete(id);
      return Promise.resolve();
    }
    // Held while a close is pending: an unreferenced thread would let the process exit mid-close.
    if (this.closing++ === 0) worker.ref();
    return new Promise<void>((resolve) => {
      registration.closed = resolve;
      worker.postMessage({ op: "close", id });
    });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(workerSource, { eval: true, workerData: { driver, intervalMs } });
    worker.unref();
    worker.on("message", (message: { op: "closed" | "failed"; id: number; error?: string }) => {
      const registration = this.registrations.get(message.id);
      if (!registration) return;
      if (message.op === "failed") {
        registration.onFailure(new Error(message.error));
        return;
      }
      this.registrations.delete(message.id);
      this.settleClose(registration);
    });
    const lost = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const registration of this.registrations.values()) {
        registration.onFailure(error);
        this.settleClose(registration);
      }
      this.registrations.clear();
      this.closing = 0;
    };
    worker.once("error", lost);
    worker.once("exit", (code) => lost(new Error(`the checkpoint thread exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private settleClose(registration: Registration): void {
    if (!registration.closed) return;
    registration.closed();
    if (--this.closing === 0) this.worker?.unref();
  }
}

const shared = new CheckpointerThread();

/** One file's checkpoints, done by the process's checkpoint thread. */
export class WalCheckpointer {
  private readonly id: number;

  /** `onFailure` runs if the thread cannot take the file or dies: the writer goes back to checkpointing itself. */
  constructor(path: string, onFailure: (error: Error) => void) {
    this.id = shared.register(path, onFailure);
  }

  /** Stops, and closes the thread's connection, so the writer's close can checkpoint and remove the WAL. */
  close(): Promise<void> {
    return shared.unregister(this.id);
  }
}
