import { runView } from "../run-view.js";
import type { Api, ServerContext } from "../server-context.js";
import { approveBodySchema, cancelBodySchema, editStateBodySchema, forkBodySchema, pauseBodySchema, readBody, rejectBodySchema, resumeBodySchema, sayBodySchema } from "../validation.js";

/** Control commands on one run; the actor journaled with each is the token's name. */
export function controlRoutes(api: Api, ctx: ServerContext): void {
  const { runtime } = ctx;

  api.post("/runs/:id/pause", ctx.guard("operator"), async function pauseRun(c) {
    const body = await readBody(c, pauseBodySchema);
    const run = await runtime.pause(c.req.param("id"), { actor: c.var.identity.actor, reason: body.reason, mode: body.mode });
    return c.json({ run: await runView(runtime, run) });
  });

  api.post("/runs/:id/resume", ctx.guard("operator"), async function resumeRun(c) {
    const body = await readBody(c, resumeBodySchema);
    const resolve = typeof body.resolve === "string" ? { action: body.resolve } : body.resolve;
    const run = await runtime.resume(c.req.param("id"), {
      actor: c.var.identity.actor,
      reason: body.reason,
      message: body.message,
      patch: body.patch,
      force: body.force,
      resolve,
      budgets: body.budgets,
    });
    return c.json({ run: await runView(runtime, run) });
  });

  api.post("/runs/:id/cancel", ctx.guard("operator"), async function cancelRun(c) {
    const body = await readBody(c, cancelBodySchema);
    const run = await runtime.cancel(c.req.param("id"), { actor: c.var.identity.actor, reason: body.reason, inherited: body.inherited });
    return c.json({ run: await runView(runtime, run) });
  });

  api.post("/runs/:id/state", ctx.guard("operator"), async function editState(c) {
    const body = await readBody(c, editStateBodySchema);
    const run = await runtime.editState(c.req.param("id"), { actor: c.var.identity.actor, message: body.message, patch: body.patch });
    return c.json({ run: await runView(runtime, run) });
  });

  api.post("/runs/:id/messages", ctx.guard("operator"), async function sayToRun(c) {
    const body = await readBody(c, sayBodySchema);
    const sent = await runtime.say(c.req.param("id"), body.text, { actor: c.var.identity.actor });
    return c.json({ run: await runView(runtime, sent.run), message: sent.message }, 202);
  });

  api.post("/runs/:id/approve", ctx.guard("operator"), async function approveCall(c) {
    const body = await readBody(c, approveBodySchema);
    const { run, decided } = await runtime.approve(c.req.param("id"), { actor: c.var.identity.actor, callSeq: body.callSeq, input: body.input, note: body.note });
    return c.json({ run: await runView(runtime, run), decided });
  });

  api.post("/runs/:id/reject", ctx.guard("operator"), async function rejectCall(c) {
    const body = await readBody(c, rejectBodySchema);
    const { run, decided } = await runtime.reject(c.req.param("id"), { actor: c.var.identity.actor, callSeq: body.callSeq, note: body.note });
    return c.json({ run: await runView(runtime, run), decided });
  });

  api.post("/runs/:id/fork", ctx.guard("operator"), async function forkRun(c) {
    const body = await readBody(c, forkBodySchema);
    const run = await runtime.fork(c.req.param("id"), { fromStep: body.fromStep, actor: c.var.identity.actor, currentVersion: body.currentVersion });
    return c.json({ run: await runView(runtime, run) }, 201);
  });
}
