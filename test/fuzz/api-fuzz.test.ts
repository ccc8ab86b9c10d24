import { describe, expect, it } from "vitest";
import { fuzzApi, send, type FuzzRequest } from "./api-fuzz.js";
import { fuzzServer } from "./fuzz-server.js";

/** A bounded, seeded slice of the API fuzz (`npm run fuzz` runs a longer campaign). */
describe("the HTTP API under hostile input", () => {
  it("never answers 5xx, always in the error shape, and a refused request changes nothing", async () => {
    const server = await fuzzServer();
    try {
      expect(server.routes.length).toBeGreaterThanOrEqual(19);
      const report = await fuzzApi(server.target, server.routes, { runs: Number(process.env.FUZZ_RUNS ?? 400), seed: Number(process.env.FUZZ_SEED ?? 20_261_203) });
      expect(report.violations).toEqual([]);
      expect(report.requests).toBeGreaterThan(300);
    } finally {
      await server.close();
    }
  }, 120_000);
});

describe("each hostile input the fuzz draws from, answered precisely", () => {
  it("path tricks, deep JSON, bad cursors and bad tokens each get a 4xx with a message that says what is wrong", async () => {
    const server = await fuzzServer();
    const auth = { authorization: `Bearer ${server.target.tokens.admin}` };
    const cases: [FuzzRequest, number, RegExp][] = [
      [{ method: "GET", path: "/api/v1/runs/a\\b", headers: auth, body: undefined }, 400, /raw backslash/],
      [{ method: "GET", path: "/api/v1/runs/%2e%2e/journal", headers: auth, body: undefined }, 400, /encoded "\.\." segment/],
      [{ method: "GET", path: "/api/v1/runs/a%00b", headers: auth, body: undefined }, 400, /control character/],
      [{ method: "GET", path: "/api/v1/runs/%ZZ", headers: auth, body: undefined }, 400, /broken percent-encoding/],
      [{ method: "GET", path: "/api/v1/runs/..%2fetc", headers: auth, body: undefined }, 400, /encoded slash/],
      [{ method: "POST", path: "/api/v1/runs", headers: { ...auth, "content-type": "application/json" }, body: Buffer.from(`{"agent":"writer","input":${"[".repeat(10_000)}${"]".repeat(10_000)}}`) }, 400, /nests JSON more than 64 levels/],
      [{ method: "POST", path: "/api/v1/runs", headers: { ...auth, "content-type": "application/json" }, body: Buffer.from([0x7b, 0xff, 0xfe]) }, 400, /not valid JSON/],
      [{ method: "GET", path: "/api/v1/events", headers: { ...auth, "last-event-id": "abc?" }, body: undefined }, 400, /^the Last-Event-ID header must be an integer from 0 to \d+, got "abc\?"$/],
      [{ method: "GET", path: `/api/v1/runs/${server.target.runIds[0]}/events`, headers: { ...auth, "last-event-id": "" }, body: undefined }, 400, /Last-Event-ID header is empty/],
      [{ method: "GET", path: "/api/v1/runs", headers: { authorization: "Bearer tether_nope" }, body: undefined }, 401, /not valid/],
      [{ method: "GET", path: "/api/v1/runs", headers: { authorization: "Basic YWRtaW46YWRtaW4=" }, body: undefined }, 401, /Bearer <token>/],
    ];
    try {
      for (const [req, status, message] of cases) {
        const answer = await send(server.target.url, req);
        expect(answer.status, `${req.method} ${req.path}`).toBe(status);
        expect(answer.contentType).toContain("application/json");
        expect(JSON.parse(answer.body).error.message, `${req.method} ${req.path}`).toMatch(message);
      }
    } finally {
      await server.close();
    }
  });
});
