import { openApiDocument } from "../openapi.js";
import type { Api, ServerContext } from "../server-context.js";

/** The API's own description, open like the health check (it holds no data). */
export function openApiRoutes(api: Api, ctx: ServerContext): void {
  const document = openApiDocument(ctx.version);
  api.get("/openapi.json", ctx.guard("none"), function openApi(c) {
    return c.json(document);
  });
}
