import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { startServer, type RunningServer } from "../../src/server/serve.js";
import { createApiToken } from "../../src/server/tokens.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { fixtureAgents } from "./fixture-agents.js";

/**
 * The client's promise of no gap and no duplicate across a dropped event stream, tested by
 * dropping it: the client talks to the server through a TCP relay that this test cuts mid-stream.
 */

/** A TCP relay to `port` that records each connection's request head and can cut them all. */
class Relay {
  readonly heads: string[] = [];
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  port = 0;

  target = 0;

  async listen(): Promise<void> {
    this.server = createServer((inbound) => {
      const outbound = createConnection({ host: "127.0.0.1", port: this.target });
      const index = this.heads.push("") - 1;
      inbound.on("data", (chunk: Buffer) => {
        if (!this.heads[index].includes("\r\n\r\n")) this.heads[index] += chunk.toString("latin1");
      });
      inbound.pipe(outbound).pipe(inbound);
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on("error", () => undefined);
        socket.on("close", () => this.sockets.delete(socket));
      }
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  /** Drops every open connection, as a network failure would. */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

describe("TetherClient.events over a connection that drops", () => {
  let dir: string;
  let store: SqliteStore;
  let runtime: Runtime;
  let server: RunningServer;
  let relay: Relay;
  let client: TetherClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tether-reconnect-"));
    store = new SqliteStore({ path: join(dir, "tether.db") });
    runtime = new Runtime({ store, agents: fixtureAgents({ tokensPerSecond: 100, rounds: 6 }, { executed: [], compensated: [] }), resolveModel: new ModelRegistry().resolver });
    runtime.startWorker();
    const admin = await createApiToken(store, { name: "alice", role: "admin" });
    relay = new Relay();
    await relay.listen();
    // The client names the relay's address in Host; the server is told it is reached by that name too.
    server = await startServer({ runtime, host: "127.0.0.1", port: 0, version: "reconnect-test", heartbeatMs: 500, allowedHosts: [`127.0.0.1:${relay.port}`] });
    relay.target = server.port;
    client = new TetherClient({ baseUrl: `http://127.0.0.1:${relay.port}`, token: admin.token });
  });

  afterAll(async () => {
    await relay.close();
    await server.close();
    await runtime.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reconnects with Last-Event-ID and yields every journal entry once, in order", async () => {
    const run = await client.start("writer", "a long answer");
    const controller = new AbortController();
    const seqs: number[] = [];
    const ids: string[] = [];
    let cuts = 0;
    for await (const event of client.events(run.id, { signal: controller.signal })) {
      ids.push(event.id);
      if (event.type !== "journal") continue;
      seqs.push(event.seq);
      // Cut the connection twice mid-run, right after an entry arrived.
      if ((seqs.length === 3 && cuts === 0) || (seqs.length === 8 && cuts === 1)) {
        cuts++;
        relay.cut();
      }
      if (event.entry.type === "status" && ["completed", "failed"].includes(String(event.entry.data.to))) controller.abort();
    }
    expect(cuts).toBe(2);
    const stored = (await client.journalAll(run.id)).map((e) => e.seq);
    expect(seqs).toEqual(stored);
    // Each reconnection asked for what came after the last id it had seen.
    const streams = relay.heads.filter((h) => h.startsWith(`GET /api/v1/runs/${run.id}/events`));
    expect(streams.length).toBeGreaterThanOrEqual(3);
    const asked = streams.map((h) => /\r\nlast-event-id: ([^\r]+)/i.exec(h)?.[1]);
    // (The client may have read a little past the cut from what was already buffered.)
    expect(asked[0]).toBeUndefined();
    expect(ids).toContain(asked[1]);
    expect(ids).toContain(asked[2]);
    expect(ids.indexOf(asked[2]!)).toBeGreaterThan(ids.indexOf(asked[1]!));
    expect(ids.indexOf(asked[1]!)).toBeGreaterThanOrEqual(ids.indexOf(String(seqs[2])));
  });
});
