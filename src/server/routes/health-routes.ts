import type { HealthResponse } from "../api-types.js";
import type { Api, ServerContext } from "../server-context.js";

export function healthRoutes(api: Api, ctx: ServerContext): void {
  api.get("/healthz", ctx.guard("none"), async function health(c) {
    let ok = true;
    try {
      await ctx.runtime.store.listHalts();
    } catch {
      ok = false;
    }
    const body: HealthResponse = { ok, store: ctx.runtime.store.kind, version: ctx.version };
    return c.json(body, ok ? 200 : 503);
  });
}

/** Who the caller is, so a client (the dashboard) can show the name and enable only what the role allows. */
export function whoamiRoutes(api: Api, ctx: ServerContext): void {
  api.get("/whoami", ctx.guard("viewer"), function whoami(c) {
    const identity = c.get("identity");
    return c.json({ name: identity.actor, role: identity.role });
  });
}
