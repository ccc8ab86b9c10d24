import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import type { Role } from "../../src/server/api-types.js";
import { routeDocs } from "../../src/server/openapi.js";
import { makeEnv } from "./helpers.js";

/**
 * The OpenAPI document: valid OpenAPI 3.1 by a real validator, and true to the server: the routes
 * it lists are exactly the ones the router answers, and each route's role is the one enforced.
 */
describe("GET /api/v1/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document, served without a token", async () => {
    const env = await makeEnv();
    try {
      const answer = await env.call("GET", "/openapi.json");
      expect(answer.status).toBe(200);
      const document = answer.body as { openapi: string; paths: Record<string, Record<string, unknown>> };
      expect(document.openapi).toBe("3.1.0");
      const result = await new Validator().validate(document as never);
      expect(result.errors ?? []).toEqual([]);
      expect(result.valid).toBe(true);
      // The start body is the zod schema the route validates with.
      const start = document.paths["/runs"].post as { requestBody: { content: { "application/json": { schema: { required: string[]; additionalProperties: boolean } } } } };
      expect(start.requestBody.content["application/json"].schema).toMatchObject({ required: ["agent", "input"], additionalProperties: false });
    } finally {
      await env.close();
    }
  });

  it("lists exactly the routes the router answers", async () => {
    const env = await makeEnv();
    try {
      const served = new Set(
        env.app.routes
          .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/v1/"))
          .map((r) => `${r.method} ${r.path.slice("/api/v1".length).replace(/:(\w+)/g, "{$1}")}`),
      );
      const documented = new Set(routeDocs.map((r) => `${r.method.toUpperCase()} ${r.path}`));
      expect([...served].filter((r) => !documented.has(r)), "served but not in src/server/openapi.ts routeDocs").toEqual([]);
      expect([...documented].filter((r) => !served.has(r)), "documented but not served").toEqual([]);
    } finally {
      await env.close();
    }
  });

  it("gives each route the least role the server enforces", async () => {
    const env = await makeEnv();
    const below: Record<Role, Role | undefined> = { viewer: undefined, operator: "viewer", admin: "operator" };
    try {
      for (const route of routeDocs) {
        if (route.success.stream) continue;
        const path = route.path.replace("{id}", "run_missing");
        const method = route.method.toUpperCase();
        if (route.role === "none") {
          expect((await env.call(method, path)).status, `${method} ${path} needs no token`).not.toBe(401);
          continue;
        }
        expect((await env.call(method, path)).status, `${method} ${path} without a token`).toBe(401);
        const weaker = below[route.role];
        if (weaker) expect((await env.call(method, path, { token: env.tokens[weaker] })).status, `${method} ${path} as ${weaker}`).toBe(403);
        expect((await env.call(method, path, { token: env.tokens[route.role] })).status, `${method} ${path} as ${route.role}`).not.toBe(403);
      }
    } finally {
      await env.close();
    }
  });
});
