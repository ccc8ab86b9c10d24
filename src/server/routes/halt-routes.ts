import type { DamagedRun } from "../../engine/store.js";
import type { HaltResponse, HaltsResponse, UnhaltResponse } from "../api-types.js";
import { runViews } from "../run-view.js";
import type { Api, ServerContext } from "../server-context.js";
import { haltBodySchema, readBody } from "../validation.js";

/** The kill switch: admin only to throw or lift, anyone with a token to look. */
export function haltRoutes(api: Api, ctx: ServerContext): void {
  const { runtime } = ctx;

  api.get("/halt", ctx.guard("viewer"), async function listHalts(c) {
    const halts = await runtime.halts();
    const damaged: DamagedRun[] = [];
    const runs = await runtime.list({ status: ["halted"], limit: 1000 }, damaged);
    const body: HaltsResponse = { halts, runs: await runViews(runtime, runs), damaged };
    return c.json(body);
  });

  api.post("/halt", ctx.guard("admin"), async function halt(c) {
    const body = await readBody(c, haltBodySchema);
    const result: HaltResponse = await runtime.halt({ actor: c.var.identity.actor, reason: body.reason, agent: body.agent });
    return c.json(result);
  });

  api.delete("/halt", ctx.guard("admin"), async function unhalt(c) {
    const agent = c.req.query("agent") || undefined;
    const reason = c.req.query("reason") || undefined;
    const result: UnhaltResponse = await runtime.unhalt({ actor: c.var.identity.actor, agent, reason });
    return c.json(result);
  });
}
