import { describe, expect, it } from "vitest";
import type { RunView } from "../server/api-types.js";
import { nextSteps } from "./format.js";

const view = (status: RunView["status"]) => ({ id: "run_1", status, approvals: [], statusReason: null, inflight: null }) as unknown as RunView;

describe("nextSteps", () => {
  it("offers only commands the run's status accepts: a queued run cannot be paused yet", () => {
    expect(nextSteps(view("queued"))).toBe("tether cancel run_1 · tether attach run_1");
    expect(nextSteps(view("running"))).toBe("tether pause run_1 · tether cancel run_1 · tether attach run_1");
    expect(nextSteps(view("paused"))).toBe("tether resume run_1 [--message <text>] · tether cancel run_1");
    expect(nextSteps(view("completed"))).toBeUndefined();
  });
});
