import { afterEach, describe, expect, it } from "vitest";
import { waitUntil } from "../testing/index.js";
import { RunWatcher, type WatchedRun } from "./run-watcher.js";
import type { RunRecord, Store } from "./store.js";

let watcher: RunWatcher | undefined;
let unstick: (() => void) | undefined;
afterEach(() => {
  unstick?.();
  for (const id of ["stuck", "a", "b"]) watcher?.delete(id);
  watcher = undefined;
});

/** A run as the watcher sees it, counting the renewals asked of it; `stuck` ones never land until released. */
function watched(runId: string, renewal: () => Promise<void>): WatchedRun & { renewals: number } {
  const run = {
    runId,
    current: { id: runId, version: 1 } as RunRecord,
    renewals: 0,
    observe() {},
    renewLeaseIfDue() {
      run.renewals += 1;
      return renewal();
    },
  };
  return run;
}

describe("the run watcher's lease renewals", () => {
  it("renews each run on its own: one whose renewal waits holds back only its own next one", async () => {
    // A store that names no changes: only the timers work here.
    const store = { getRun: async () => undefined } as unknown as Store;
    watcher = new RunWatcher({ store, now: () => Date.now(), checkMs: 60_000, renewCheckMs: 5 });
    const held = new Promise<void>((resolve) => (unstick = resolve));
    const stuck = watched("stuck", () => held);
    const a = watched("a", async () => undefined);
    const b = watched("b", async () => undefined);
    watcher.add(stuck);
    watcher.add(a);
    watcher.add(b);
    await waitUntil(() => a.renewals >= 5 && b.renewals >= 5, { what: "the other runs' renewals, tick after tick" });
    // The stuck run is not asked again while its renewal is being written.
    expect(stuck.renewals).toBe(1);
    unstick!();
    await waitUntil(() => stuck.renewals >= 2, { what: "the stuck run's next renewal once its last landed" });
  });
});
