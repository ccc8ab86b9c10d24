import type { CampaignReport, CancelCampaignReport } from "./campaign.js";

/** Everything the campaign promises, as a list of broken promises (empty when all hold). */
export function campaignViolations(report: CampaignReport, options: { minKills: number }): string[] {
  const problems = [...report.violations];
  if (report.kills < options.minKills) problems.push(`only ${report.kills} kill points, expected at least ${options.minKills}`);
  for (const run of report.runs) {
    if (run.status !== "completed") problems.push(`${run.runId} ended ${run.status}, not completed`);
    else if (JSON.stringify(run.output) !== JSON.stringify(run.expectedOutput)) {
      problems.push(`${run.runId} output ${JSON.stringify(run.output)} differs from the uninterrupted run's ${JSON.stringify(run.expectedOutput)}`);
    }
  }
  // Without these the campaign would pass without testing what it claims to test.
  if (!report.inFlightAtKill.append_log) problems.push("no kill landed during a non-idempotent effect");
  if (!report.inFlightAtKill.record_fact) problems.push("no kill landed during an idempotent effect");
  if (!report.uncertainResolutions.length) problems.push("no run paused for an uncertain effect");
  return problems;
}

export function cancelViolations(report: CancelCampaignReport, options: { minKills: number }): string[] {
  const problems: string[] = [...report.unhandledRejections];
  if (report.kills < options.minKills) problems.push(`only ${report.kills} kills during cancelling, expected at least ${options.minKills}`);
  for (const run of report.runs) {
    const id = run.runId;
    if (run.status !== "cancelled") problems.push(`${id} ended ${run.status}, not cancelled`);
    const seqs = run.effects.map((e) => e.callSeq).sort((a, b) => b - a);
    for (const effect of run.effects) {
      if (effect.state !== "compensated") problems.push(`${id}: effect ${effect.callSeq} is ${effect.state}, not compensated`);
      if (run.succeededPerEffect[effect.callSeq] !== 1) problems.push(`${id}: effect ${effect.callSeq} has ${run.succeededPerEffect[effect.callSeq] ?? 0} compensation.succeeded entries`);
    }
    if (JSON.stringify(run.compensationOrder) !== JSON.stringify(seqs)) {
      problems.push(`${id}: compensation started in order ${run.compensationOrder.join(",")}, expected newest first ${seqs.join(",")}`);
    }
    const effectKeys = run.effects.map((e) => `${id}:${e.callSeq}`).sort();
    if (JSON.stringify([...run.draftKeys].sort()) !== JSON.stringify(effectKeys)) problems.push(`${id}: drafts in the ledger ${run.draftKeys.join(",")} differ from effects ${effectKeys.join(",")}`);
    for (const [key, n] of Object.entries(run.ledgerCompensations)) if (n !== 1) problems.push(`${id}: draft ${key} compensated ${n} times in the ledger`);
    const compensated = run.report?.compensated.map((c) => c.callSeq) ?? [];
    if (JSON.stringify(compensated) !== JSON.stringify(seqs)) problems.push(`${id}: the cancel report lists ${compensated.join(",")}, expected ${seqs.join(",")}`);
    if (run.report?.failed.length) problems.push(`${id}: the cancel report lists failed compensations ${JSON.stringify(run.report.failed)}`);
  }
  return problems;
}
