import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

/** A TypeScript child process (run with `node --import tsx`) that says "ready" over IPC. */
export class ChildWorker {
  private stderrTail = "";
  /** What the child reported as unhandled rejections (`{type: "unhandled_rejection"}` messages). */
  readonly unhandledRejections: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedFlag = false;
  private readonly messageListeners = new Set<(message: Record<string, unknown>) => void>();

  private constructor(private readonly child: ChildProcess) {
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-4000);
    });
    child.on("message", (message) => {
      const m = message as Record<string, unknown>;
      if (m.type === "unhandled_rejection") this.unhandledRejections.push(`child ${child.pid}: unhandled rejection: ${String(m.error)}`);
      for (const listener of this.messageListeners) listener(message as Record<string, unknown>);
    });
    this.exited = new Promise((resolve) =>
      child.on("exit", (code, signal) => {
        this.exitedFlag = true;
        resolve({ code, signal });
      }),
    );
  }

  /** Starts `script` with one JSON argument and waits for its `{type: "ready"}` message. */
  static async spawn(script: string, options: unknown, readyTimeoutMs = 20_000): Promise<ChildWorker> {
    const child = spawn(process.execPath, ["--import", "tsx", script, JSON.stringify(options)], {
      cwd: projectRoot,
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    const worker = new ChildWorker(child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child ${script} not ready after ${readyTimeoutMs} ms: ${worker.stderr}`)), readyTimeoutMs);
      worker.onMessage((message) => {
        if (message.type !== "ready") return;
        clearTimeout(timer);
        resolve();
      });
      void worker.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`child ${script} exited before it was ready (code ${code}, signal ${signal}): ${worker.stderr}`));
      });
    });
    return worker;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get alive(): boolean {
    return !this.exitedFlag;
  }

  get stderr(): string {
    return this.stderrTail;
  }

  onMessage(listener: (message: Record<string, unknown>) => void): () => void {
    this.messageListeners.add(listener);
    return () => this.messageListeners.delete(listener);
  }

  send(message: Record<string, unknown>): void {
    this.child.send(message);
  }

  /** SIGKILL: no cleanup of any kind runs in the child. */
  async kill(): Promise<void> {
    if (!this.exitedFlag) this.child.kill("SIGKILL");
    await this.exited;
  }

  /** Asks the child to close its runtime and exit; SIGKILL if it does not within `timeoutMs`. */
  async stop(timeoutMs = 5_000): Promise<void> {
    if (this.exitedFlag) return;
    this.child.send({ type: "stop" });
    const timer = setTimeout(() => this.child.kill("SIGKILL"), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `test` every `intervalMs` until it holds; throws with `what` after `timeoutMs`. */
export async function waitUntil(test: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000, intervalMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await test()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await sleep(intervalMs);
  }
}
