import { afterEach, describe, expect, it } from "vitest";
import { makeEnv, type TestEnv } from "./helpers.js";

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe("POST /runs/:id/messages", () => {
  it("queues a message for a running run (202), journaled with the token's name; a viewer may not (403)", async () => {
    env = await makeEnv({ fixture: { tokensPerSecond: 50, rounds: 6 } });
    const started = await env.call("POST", "/runs", { token: env.tokens.operator, body: { agent: "writer", input: "write slowly" } });
    const id = started.body.run.id as string;
    const refused = await env.call("POST", `/runs/${id}/messages`, { token: env.tokens.viewer, body: { text: "hi" } });
    expect(refused.status).toBe(403);
    const sent = await env.call("POST", `/runs/${id}/messages`, { token: env.tokens.operator, body: { text: "Keep it short." } });
    expect(sent.status).toBe(202);
    expect(sent.body.message).toMatchObject({ text: "Keep it short.", actor: "operator-token" });
    const journal = (await env.call("GET", `/runs/${id}/journal`, { token: env.tokens.viewer })).body.entries as { type: string; data: Record<string, unknown> }[];
    expect(journal.filter((e) => e.type === "message.queued").map((e) => e.data)).toEqual([{ id: sent.body.message.id, actor: "operator-token", text: "Keep it short." }]);
    expect((await env.call("POST", `/runs/${id}/messages`, { token: env.tokens.operator, body: { text: "" } })).status).toBe(400);
    expect((await env.call("POST", `/runs/${id}/messages`, { token: env.tokens.operator, body: { text: "x", extra: 1 } })).status).toBe(400);
    await env.runtime.waitFor(id, ["completed", "failed"], { timeoutMs: 30_000 });
    const after = (await env.call("GET", `/runs/${id}/journal?limit=5000`, { token: env.tokens.viewer })).body.entries as { type: string; data: Record<string, unknown> }[];
    expect(after.filter((e) => e.type === "message.delivered").map((e) => e.data.id)).toEqual([sent.body.message.id]);
    expect(after.some((e) => e.type === "status" && e.data.to === "paused")).toBe(false);
  });
});
