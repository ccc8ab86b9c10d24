import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeViolation } from "../soak/soak-checker.js";
import { runRaces, type RacesReport, type RacesStoreKind } from "./races-campaign.js";

/**
 * The CI slice of the control races (`npm run races` runs hundreds of rounds per store): three
 * controller processes fire conflicting pause, resume and cancel commands at the same runs at
 * the same moment, and now and then a halt or unhalt of the second agent's scope, while worker
 * processes execute them; the store and the ledger are then read afresh.
 */
const dir = mkdtempSync(join(tmpdir(), "tether-races-ci-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function racesSlice(store: RacesStoreKind, seed: number, rounds: number) {
  let report: RacesReport;
  beforeAll(async () => {
    report = await runRaces({ store, dir: join(dir, store), seed, rounds, keepOnViolations: false });
    console.info(
      `races on ${store}: ${report.races} races over ${report.rounds} rounds on ${report.runs} runs, ${report.commands} commands, ` +
        `halts and unhalts ${JSON.stringify(report.scopeCommands)} (${report.haltedRuns} runs halted, ${report.cancellingAfterUnhalt} back to cancelling), outcomes ${JSON.stringify(report.outcomes)}, ` +
        `spread within a race p50 ${report.spreadMs.p50} ms / max ${report.spreadMs.max} ms, runs ended ${JSON.stringify(report.figures.byStatus)}, violations ${report.violations.length}`,
    );
  }, 170_000);

  it("raced what it claims: commands of every kind on the same runs at once, applied, held, refused and superseded", () => {
    expect(report.races).toBe(rounds * 4);
    expect(report.commands).toBe(rounds * 4 * 3);
    for (const outcome of ["pause: applied", "pause: already_holds", "resume: applied", "resume: already_holds", "cancel: applied", "halt: applied", "unhalt: applied"]) {
      expect(report.outcomes[outcome] ?? 0).toBeGreaterThan(0);
    }
    // The halt raced the commands on the runs it stopped: some were refused because of it.
    expect((report.outcomes["pause: refused: halted"] ?? 0) + (report.outcomes["resume: refused: halted"] ?? 0)).toBeGreaterThan(0);
    expect((report.outcomes["pause: refused: illegal_transition"] ?? 0) + (report.outcomes["resume: refused: illegal_transition"] ?? 0)).toBeGreaterThan(0);
  });

  it("every command has exactly one recorded outcome, the one its caller was told; a cancel applied means cancelled; nothing stuck; the soak's rules hold", () => {
    expect(report.violations.map(describeViolation)).toEqual([]);
    expect(report.figures.byStatus).toEqual({ completed: expect.any(Number), cancelled: expect.any(Number) });
  });
}

describe("control races across processes on SQLite (one worker process, three controllers)", () => {
  racesSlice("sqlite", 21, 30);
});

describe("control races across processes on PostgreSQL (two worker processes, three controllers)", () => {
  racesSlice("postgres", 22, 30);
});
