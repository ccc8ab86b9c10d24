import type { DamagedRun } from "../../engine/store.js";
import type { JournalPage, RunsResponse, StateResponse, StorageResponse } from "../api-types.js";
import { runView, runViews } from "../run-view.js";
import type { Api, ServerContext } from "../server-context.js";
import { parseIntegerParam, parseStatuses, readBody, startBodySchema } from "../validation.js";

/** Starting runs and reading them: the list, one run, its journal, its state, a cancel preview. */
export function runRoutes(api: Api, ctx: ServerContext): void {
  const { runtime } = ctx;

  api.post("/runs", ctx.guard("operator"), async function startRun(c) {
    const body = await readBody(c, startBodySchema);
    const run = await runtime.start(body.agent, body.input, { owner: c.var.identity.actor, budgets: body.budgets, model: body.model });
    return c.json({ run: await runView(runtime, run) }, 201);
  });

  api.get("/runs", ctx.guard("viewer"), async function listRuns(c) {
    const status = parseStatuses(c.req.query("status"));
    const limit = parseIntegerParam("limit", c.req.query("limit"), { min: 1, max: 1000, fallback: 100 });
    const agent = c.req.query("agent") || undefined;
    const damaged: DamagedRun[] = [];
    const runs = await runtime.list({ status, agent, limit }, damaged);
    const body: RunsResponse = { runs: await runViews(runtime, runs), damaged };
    return c.json(body);
  });

  api.get("/runs/:id", ctx.guard("viewer"), async function getRun(c) {
    const run = await runtime.get(c.req.param("id"));
    return c.json({ run: await runView(runtime, run) });
  });

  api.get("/runs/:id/storage", ctx.guard("viewer"), async function storage(c) {
    const body: StorageResponse = { storage: await runtime.storage(c.req.param("id")) };
    return c.json(body);
  });

  api.get("/runs/:id/journal", ctx.guard("viewer"), async function readJournal(c) {
    const afterSeq = parseIntegerParam("after", c.req.query("after"), { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: 0 });
    const limit = parseIntegerParam("limit", c.req.query("limit"), { min: 1, max: 5000, fallback: 500 }) ?? 500;
    const entries = await runtime.journal(c.req.param("id"), { after: afterSeq, limit });
    const body: JournalPage = { entries, next: entries.length === limit ? entries[entries.length - 1].seq : null };
    return c.json(body);
  });

  api.get("/runs/:id/state", ctx.guard("viewer"), async function readState(c) {
    const runId = c.req.param("id");
    const run = await runtime.get(runId);
    const state = await runtime.state(runId);
    const body: StateResponse = { state, snapshotAt: run.snapshotAt, step: run.step };
    return c.json(body);
  });

  api.get("/runs/:id/cancel-preview", ctx.guard("viewer"), async function cancelPreview(c) {
    return c.json(await runtime.cancelPreview(c.req.param("id")));
  });
}
