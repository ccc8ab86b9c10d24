import { readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { toolLoopAgent } from "../../src/agents/tool-loop-agent.js";
import type { RunEvent } from "../../src/engine/events.js";
import { tool } from "../../src/engine/tool.js";
import { createApp } from "../../src/server/app.js";
import { startOpenAICompatibleServer, type OpenAICompatibleServer } from "../../src/testing/openai-compatible-server.js";
import { testModel, wireRuntime, type WireRuntime } from "./wire-helpers.js";

/**
 * A provider key set in the environment, echoed back by a gateway's error body and by a tool's
 * error, must not be stored or sent anywhere: not in the database file (nor its WAL), the events,
 * the API's answers, or the logs.
 */

const marker = `sk-tether-marker-${process.pid}-5f1c9a`;

describe("secrets stay out of everything Tether stores or sends", () => {
  let server: OpenAICompatibleServer;
  let wire: WireRuntime | undefined;
  const logged: string[] = [];

  beforeEach(async () => {
    process.env.OPENAI_COMPATIBLE_API_KEY = marker;
    server = await startOpenAICompatibleServer();
    for (const method of ["log", "info", "warn", "error"] as const) vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    delete process.env.OPENAI_COMPATIBLE_API_KEY;
    await wire?.close();
    await server.close();
  });

  it("a provider error and a tool error that echo the key are redacted in the journal, the state, the file, events, the API and logs", async () => {
    server.enqueue(
      { type: "error", status: 401, message: `Incorrect API key provided: ${marker}. You can find your key at https://example.com.`, code: "invalid_api_key" },
      { text: "Checking.", toolCalls: [{ id: "call_1", name: "echo", arguments: JSON.stringify({ q: "x" }) }] },
      { text: "Done." },
    );
    const echo = tool({
      name: "echo",
      description: "Fails, quoting its configuration",
      input: z.object({ q: z.string() }),
      execute: async () => {
        throw new Error(`upstream refused key ${marker}`);
      },
    });
    wire = wireRuntime([toolLoopAgent({ name: "leaky", model: server.modelString(testModel), tools: [echo] })]);
    const { runtime, store } = wire;
    const events: RunEvent[] = [];
    const run = await runtime.start("leaky", "go");
    const off = runtime.subscribe(run.id, {}, (e) => events.push(e));
    const paused = await runtime.waitFor(run.id, ["paused", "failed", "completed"], { timeoutMs: 10_000 });
    expect(paused.statusReason).toContain("[redacted]");
    await runtime.resume(run.id);
    const done = await runtime.waitFor(run.id, ["completed", "failed", "paused"], { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    off();

    const journal = JSON.stringify(await runtime.journal(run.id));
    expect(journal).toContain("Incorrect API key provided: [redacted]");
    expect(journal).toContain("upstream refused key [redacted]");
    expect(journal).not.toContain(marker);
    expect(JSON.stringify(await runtime.state(run.id))).not.toContain(marker);
    expect(JSON.stringify(events)).not.toContain(marker);
    // The model was told the tool failed, without the key.
    expect(JSON.stringify(server.completions.map((c) => c.body))).not.toContain(marker);

    const app = createApp({ runtime, auth: { mode: "off" }, version: "test" });
    for (const path of [`/api/v1/runs/${run.id}`, `/api/v1/runs/${run.id}/journal`, `/api/v1/runs/${run.id}/state`, "/api/v1/runs"]) {
      const text = await (await app.fetch(new Request(`http://localhost${path}`))).text();
      expect(text.length, path).toBeGreaterThan(2);
      expect(text, path).not.toContain(marker);
    }
    // The bytes on disk: the database and whatever is still in its WAL.
    const file = (store as unknown as { path: string }).path;
    const folder = dirname(file);
    for (const name of readdirSync(folder)) expect(readFileSync(`${folder}/${name}`).includes(Buffer.from(marker)), name).toBe(false);
    expect(logged.join("\n")).not.toContain(marker);
  });
});
