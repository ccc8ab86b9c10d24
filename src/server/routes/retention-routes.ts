import type { PruneResponse } from "../api-types.js";
import type { Api, ServerContext } from "../server-context.js";
import { pruneBodySchema, readBody } from "../validation.js";

/** Retention: deleting finished runs is an admin's call. */
export function retentionRoutes(api: Api, ctx: ServerContext): void {
  const { runtime } = ctx;

  api.post("/prune", ctx.guard("admin"), async function prune(c) {
    const body = await readBody(c, pruneBodySchema);
    const before = body.before ?? runtime.clock.now() - body.olderThanMs!;
    const report = await runtime.prune({ before, dryRun: body.dryRun, batchSize: body.batchSize });
    const result: PruneResponse = { ...report, before, dryRun: body.dryRun ?? false };
    return c.json(result);
  });
}
