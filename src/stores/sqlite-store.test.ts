import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SnapshotWriter } from "../engine/snapshot.js";
import type { AgentState } from "../engine/state.js";
import { storeConformance } from "../testing/store-conformance.js";
import { tempSqlite } from "../testing/temp-store.js";
import { SqliteStore } from "./sqlite-store.js";

storeConformance("sqlite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tether-store-"));
  const store = new SqliteStore({ path: join(dir, "tether.db") });
  return {
    store,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe("SqliteStore", () => {
  it("keeps everything across connections to the same file, in WAL mode", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tether-store-"));
    try {
      const path = join(dir, "tether.db");
      const first = new SqliteStore({ path });
      expect(first.database.pragma("journal_mode", { simple: true })).toBe("wal");
      await first.insertCommand({ id: "cmd_1", runId: null, type: "halt", actor: "ops", reason: null, payload: {}, createdAt: 1, appliedAt: 1, outcome: "applied" });
      await first.setHalt({ scope: "*", actor: "ops", reason: null, at: 1 });
      const second = new SqliteStore({ path });
      expect(await second.listHalts()).toEqual([{ scope: "*", actor: "ops", reason: null, at: 1 }]);
      await first.close();
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("has a change marker that moves with a write on this connection or another, and only then", async () => {
    const sqlite = tempSqlite();
    try {
      const first = sqlite.open();
      const second = sqlite.open();
      const halt = { scope: "*", actor: "ops", reason: null, at: 1 };
      const start = first.changeMarker();
      await first.listHalts();
      expect(first.changeMarker()).toBe(start);
      await second.setHalt(halt);
      const afterOther = first.changeMarker();
      expect(afterOther).not.toBe(start);
      expect(first.changeMarker()).toBe(afterOther);
      await first.clearHalt("*");
      expect(first.changeMarker()).not.toBe(afterOther);
    } finally {
      await sqlite.cleanup();
    }
  });

  it("keeps a writer that never pauses within its WAL bound: the file is reused, not grown", async () => {
    const sqlite = tempSqlite();
    try {
      const store = sqlite.open();
      const state: AgentState = { messages: [{ role: "user", content: "go" }], vars: { done: 0 } };
      const { writer, write } = SnapshotWriter.forNewRun(state, 1);
      const runId = "run_busy";
      await store.createRun(
        { id: runId, agent: "a", agentVersion: "1", owner: "o", status: "running", input: null, model: null, budgets: {}, forkedFrom: null, step: 0, createdAt: 1 },
        write,
        [{ type: "run.created", at: 1, data: {} }],
      );
      writer.commit();
      const text = "durable ".repeat(125);
      let largestWal = 0;
      // Each step commits at least two 8 KB pages (the journal's last and the run's), so 6,000
      // steps put about three times the bound through the WAL.
      for (let step = 1; step <= 6000; step++) {
        state.messages.push({ role: "assistant", content: text });
        state.vars = { done: step };
        const result = await store.update({
          runId,
          set: { step },
          journal: [{ type: "call.completed", at: 1 + step, callSeq: step, data: { kind: "model" } }],
          snapshot: writer.prepare(state, step, 1 + step),
        });
        expect(result.ok).toBe(true);
        writer.commit();
        if (step % 250 === 0) largestWal = Math.max(largestWal, statSync(`${sqlite.path}-wal`).size);
      }
      // The bound is 32 MiB; a commit that reaches it while the checkpoint thread holds the
      // checkpoint lock leaves the copy to a later one, so the file overshoots by what is written
      // meanwhile (1–6 MiB here). Unbounded, 6,000 steps grow it past 100 MiB.
      expect(largestWal).toBeGreaterThan(24 * 1024 * 1024);
      expect(largestWal).toBeLessThan(64 * 1024 * 1024);
    } finally {
      await sqlite.cleanup();
    }
  });
});
