import Database from "better-sqlite3";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { bundledAgents } from "../../examples/index.js";
import { Runtime } from "../engine/runtime.js";
import { restoreState } from "../engine/snapshot.js";
import { ModelRegistry } from "../models/model-registry.js";
import { journalTypeOf, messagesInRows, perRun, runChecksummedColumns, sqliteRunIntact, storeLayout, type RunRow } from "./sqlite-schema.js";
import { SqliteStore } from "./sqlite-store.js";

/** Everything a user sees of a run, read straight from a file of an earlier layout. */
interface RawView {
  doc: Record<string, unknown>;
  journal: { seq: number; type: string; at: number; data: unknown }[];
  messages: unknown[];
  commands: number;
  effects: number;
}

function rawView(path: string, runId: string, read: (db: Database.Database) => Pick<RawView, "journal" | "messages">): RawView {
  const db = new Database(path, { readonly: true });
  try {
    return {
      doc: JSON.parse((db.prepare("SELECT doc FROM runs WHERE id = ?").get(runId) as { doc: string }).doc),
      ...read(db),
      commands: db.prepare("SELECT id FROM commands WHERE run_id = ?").all(runId).length,
      effects: db.prepare("SELECT call_seq FROM effects WHERE run_id = ?").all(runId).length,
    };
  } finally {
    db.close();
  }
}

/** Layout 2: rows keyed by text run id, entry types as names. */
function layout2View(path: string, runId: string): RawView {
  return rawView(path, runId, (db) => ({
    journal: (db.prepare("SELECT seq, type, at, data FROM journal WHERE run_id = ? ORDER BY seq").all(runId) as { seq: number; type: string; at: number; data: string }[]).map(
      (row) => ({ seq: row.seq, type: row.type, at: row.at, data: JSON.parse(row.data) }),
    ),
    messages: (db.prepare("SELECT body FROM messages WHERE run_id = ? ORDER BY idx").pluck().all(runId) as string[]).map((body) => JSON.parse(body)),
  }));
}

/** Layout 3: entry `seq` and message `index` at the run's key times 2^26 plus the number, messages in their own table. */
function layout3View(path: string, runId: string): RawView {
  return rawView(path, runId, (db) => {
    const { rk } = db.prepare("SELECT rk FROM runs WHERE id = ?").get(runId) as { rk: number };
    const range = [rk * perRun, (rk + 1) * perRun];
    return {
      journal: (db.prepare("SELECT k, type, at, data FROM journal WHERE k >= ? AND k < ? ORDER BY k").all(...range) as { k: number; type: number; at: number; data: string }[]).map(
        (row) => ({ seq: row.k - range[0], type: journalTypeOf(row.type), at: row.at, data: JSON.parse(row.data) }),
      ),
      messages: (db.prepare("SELECT body FROM messages WHERE k >= ? AND k < ? ORDER BY k").pluck().all(...range) as string[]).map((body) => JSON.parse(body)),
    };
  });
}

/** Layout 4: entry `seq` at row 2·seq of the run's range, the messages a snapshot appended in the row before it; no checksums. */
function layout4View(path: string, runId: string): RawView {
  return rawView(path, runId, (db) => {
    const { rk } = db.prepare("SELECT rk FROM runs WHERE id = ?").get(runId) as { rk: number };
    const range = [rk * perRun, (rk + 1) * perRun];
    const rows = db.prepare("SELECT k, type, at, data FROM journal WHERE k >= ? AND k < ? ORDER BY k").all(...range) as { k: number; type: number; at: number; data: string }[];
    return {
      journal: rows.filter((row) => row.type > 0).map((row) => ({ seq: (row.k - range[0]) / 2, type: journalTypeOf(row.type), at: row.at, data: JSON.parse(row.data) })),
      messages: messagesInRows(rows.filter((row) => row.type <= 0).map((row) => row.data)).map((body) => JSON.parse(body)),
    };
  });
}

/**
 * Files written by earlier Tethers: one deep-research run completed, one paused by a person
 * after three steps. `layout-2.db` was written before layout 3 (commit 3fd0242); `layout-3.db`
 * before layout 4 (commit 86f6fba), and its paused run has a person's message and a vars edit;
 * `layout-4.db` is `layout-3.db` as layout 4 (before row checksums, commit b404a33) migrated it;
 * `layout-5.db` is `layout-4.db` as layout 5 (before run row checksums, commit 4df4650) migrated it.
 */
const fixtures = [
  { layout: 2, file: "layout-2.db", completedId: "run_a37676369495867b", pausedId: "run_00beaedde65c5016", view: layout2View },
  { layout: 3, file: "layout-3.db", completedId: "run_63d4432931599dd3", pausedId: "run_518f5aa4bd77b785", view: layout3View },
  { layout: 4, file: "layout-4.db", completedId: "run_63d4432931599dd3", pausedId: "run_518f5aa4bd77b785", view: layout4View },
  // Layout 5 has layout 4's tables, with checksums on the journal rows.
  { layout: 5, file: "layout-5.db", completedId: "run_63d4432931599dd3", pausedId: "run_518f5aa4bd77b785", view: layout4View },
];

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe.each(fixtures)("a store written by an earlier Tether (layout $layout)", ({ file, completedId, pausedId, view }) => {
  function copyOfFixture(): string {
    dir = mkdtempSync(join(tmpdir(), "tether-migration-"));
    const path = join(dir, "tether.db");
    copyFileSync(fileURLToPath(new URL(`./fixtures/${file}`, import.meta.url)), path);
    return path;
  }

  it("is migrated on open: every run, journal entry, message, command and effect is kept", async () => {
    const path = copyOfFixture();
    const before = [completedId, pausedId].map((id) => view(path, id));
    expect(before[1].doc.status).toBe("paused");

    const store = new SqliteStore({ path });
    try {
      expect(store.database.pragma("user_version", { simple: true })).toBe(storeLayout);
      for (const [i, id] of [completedId, pausedId].entries()) {
        expect(await store.getRun(id)).toEqual(before[i].doc);
        const journal = await store.readJournal(id, { limit: 10_000 });
        expect(journal.map((e) => ({ seq: e.seq, type: e.type, at: e.at, data: e.data }))).toEqual(before[i].journal);
        const { state } = restoreState(id, await store.loadState(id));
        expect(state.messages).toEqual(before[i].messages);
        expect((await store.listCommands(id)).length).toBe(before[i].commands);
        expect((await store.listEffects(id)).length).toBe(before[i].effects);
      }
      // An earlier snapshot restores too (fork reads them).
      const early = restoreState(completedId, await store.loadState(completedId, { atStep: 2 }));
      expect(early.state.messages.length).toBeLessThan(before[0].messages.length);
    } finally {
      await store.close();
    }
  });

  it("fills every run row's checksum, so each run reads back, and a record changed after that is refused", async () => {
    const path = copyOfFixture();
    const raw = new Database(path, { readonly: true });
    const columns = raw.prepare("SELECT name FROM pragma_table_info('runs')").pluck().all();
    raw.close();
    expect(columns).not.toContain("crc");

    const store = new SqliteStore({ path });
    try {
      const rows = store.database.prepare(`SELECT ${runChecksummedColumns} FROM runs`).all() as (RunRow & { crc: number | null })[];
      expect(rows.length).toBe(2);
      for (const row of rows) expect(sqliteRunIntact(row)).toBe(true);
      expect((await store.getRun(completedId))?.status).toBe("completed");
      store.database.prepare("UPDATE runs SET doc = replace(doc, '\"status\":\"completed\"', '\"status\":\"completec\"') WHERE id = ?").run(completedId);
      await expect(store.getRun(completedId)).rejects.toMatchObject({ code: "store_corrupt", details: expect.objectContaining({ runId: completedId }) });
      expect((await store.getRun(pausedId))?.status).toBe("paused");
    } finally {
      await store.close();
    }
  });

  it("resumes the paused run to completion after the migration", async () => {
    const path = copyOfFixture();
    const store = new SqliteStore({ path });
    const runtime = new Runtime({
      agents: bundledAgents({ dataDir: join(dir!, "examples"), tokensPerSecond: Number.POSITIVE_INFINITY }),
      store,
      resolveModel: new ModelRegistry().resolver,
    });
    try {
      // The fixture's one-word question makes the simulated researcher search the same words
      // again, and the run was paused during that repeat: the loop guard would stop it at once.
      await runtime.resume(pausedId, { actor: "test", force: true, budgets: { maxRepeatedToolCalls: 5 } });
      const done = await runtime.waitFor(pausedId, ["completed", "failed", "paused"], { timeoutMs: 20_000 });
      expect({ status: done.status, reason: done.statusReason, error: done.error }).toEqual({ status: "completed", reason: null, error: null });
      const journal = await runtime.journal(pausedId, { limit: 10_000 });
      const started = journal.filter((e) => e.type === "call.started").map((e) => e.callSeq);
      expect(new Set(started).size).toBe(started.length);
    } finally {
      await runtime.close();
      await store.close();
    }
  });

  it("is opened by a second connection without migrating twice", async () => {
    const path = copyOfFixture();
    const first = new SqliteStore({ path });
    const second = new SqliteStore({ path });
    try {
      expect((await second.getRun(pausedId))?.status).toBe("paused");
      expect(second.database.prepare("SELECT name FROM sqlite_schema WHERE name LIKE '%layout%' OR name = 'messages'").all()).toEqual([]);
      expect(second.database.pragma("user_version", { simple: true })).toBe(storeLayout);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("refuses a file from a newer Tether with store_too_new and leaves it untouched", async () => {
    const path = copyOfFixture();
    const db = new Database(path);
    db.pragma(`user_version = ${storeLayout + 1}`);
    db.close();
    expect(() => new SqliteStore({ path })).toThrow(expect.objectContaining({ code: "store_too_new" }));
    const after = new Database(path, { readonly: true });
    expect(after.prepare("SELECT count(*) AS n FROM runs").get()).toEqual({ n: 2 });
    after.close();
  });
});
