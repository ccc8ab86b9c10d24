import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { storeConformance } from "../testing/store-conformance.js";
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
    const dir = mkdtempSync(join(tmpdir(), "tether-store-"));
    try {
      const path = join(dir, "tether.db");
      const first = new SqliteStore({ path });
      const second = new SqliteStore({ path });
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
      await first.close();
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
