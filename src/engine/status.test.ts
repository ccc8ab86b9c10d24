import { describe, expect, it } from "vitest";
import { commandTransitions, isLegalEdge, isTerminal, legalEdges, runStatuses } from "./status.js";

describe("run lifecycle", () => {
  it("has nine statuses, three of them terminal", () => {
    expect(runStatuses).toHaveLength(9);
    expect(runStatuses.filter(isTerminal)).toEqual(["cancelled", "completed", "failed"]);
  });

  it("lets nothing leave a terminal status", () => {
    for (const status of runStatuses.filter(isTerminal)) expect(legalEdges[status]).toEqual([]);
  });

  it("lets cancel start from every non-terminal status but cancelling", () => {
    expect([...commandTransitions.cancel.from].sort()).toEqual(["halted", "paused", "pausing", "queued", "running"]);
    expect(isLegalEdge("halted", "paused")).toBe(true);
    expect(isLegalEdge("paused", "completed")).toBe(false);
  });
});
