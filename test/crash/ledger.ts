import Database from "better-sqlite3";
import type { Json } from "../../src/index.js";

/**
 * The "outside world" of the crash campaign: a SQLite file apart from Tether's store that the
 * agent's tools write to and the test reads. It records every attempt, so the test can tell
 * a retry that the ledger absorbed from an effect applied twice.
 */
const schema = `
CREATE TABLE IF NOT EXISTS idempotent_writes (key TEXT PRIMARY KEY, run_id TEXT NOT NULL, value TEXT NOT NULL, result TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idempotent_attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS appends (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, run_id TEXT NOT NULL, value TEXT NOT NULL, result TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS drafts (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, run_id TEXT NOT NULL, title TEXT NOT NULL, result TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS compensations (key TEXT PRIMARY KEY, effect_key TEXT NOT NULL, run_id TEXT NOT NULL, pid INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS compensation_attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, pid INTEGER NOT NULL, at INTEGER NOT NULL);
`;

export interface AppendRow {
  key: string;
  runId: string;
  value: string;
  result: Json;
  pid: number;
}

export class Ledger {
  private readonly db: Database.Database;

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma("busy_timeout = 5000");
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.exec(schema);
  }

  /** Applies the write once per key; a second application with the same key returns the first result. */
  putIdempotent(key: string, runId: string, value: string, result: Json): Json {
    return this.db.transaction(() => {
      this.db.prepare("INSERT INTO idempotent_attempts (key, pid) VALUES (?, ?)").run(key, process.pid);
      this.db.prepare("INSERT OR IGNORE INTO idempotent_writes (key, run_id, value, result) VALUES (?, ?, ?, ?)").run(key, runId, value, JSON.stringify(result));
      const row = this.db.prepare("SELECT result FROM idempotent_writes WHERE key = ?").get(key) as { result: string };
      return JSON.parse(row.result) as Json;
    })();
  }

  /** No check at all: applying it twice appends twice, which is what the campaign must never let happen. */
  append(key: string, runId: string, value: string, result: Json): void {
    this.db.prepare("INSERT INTO appends (key, run_id, value, result, pid) VALUES (?, ?, ?, ?, ?)").run(key, runId, value, JSON.stringify(result), process.pid);
  }

  /** Also unchecked on write; the tool declares `check`, which asks `findDraft`. */
  publishDraft(key: string, runId: string, title: string, result: Json): void {
    this.db.prepare("INSERT INTO drafts (key, run_id, title, result, pid) VALUES (?, ?, ?, ?, ?)").run(key, runId, title, JSON.stringify(result), process.pid);
  }

  findDraft(key: string): Json | undefined {
    const row = this.db.prepare("SELECT result FROM drafts WHERE key = ? ORDER BY id LIMIT 1").get(key) as { result: string } | undefined;
    return row ? (JSON.parse(row.result) as Json) : undefined;
  }

  findAppend(key: string): Json | undefined {
    const row = this.db.prepare("SELECT result FROM appends WHERE key = ? ORDER BY id LIMIT 1").get(key) as { result: string } | undefined;
    return row ? (JSON.parse(row.result) as Json) : undefined;
  }

  /** Undoes a draft once per compensation key, however often it is attempted. */
  compensate(compensationKey: string, effectKey: string, runId: string, at: number): void {
    this.db.transaction(() => {
      this.db.prepare("INSERT INTO compensation_attempts (key, pid, at) VALUES (?, ?, ?)").run(compensationKey, process.pid, at);
      this.db.prepare("INSERT OR IGNORE INTO compensations (key, effect_key, run_id, pid, at) VALUES (?, ?, ?, ?, ?)").run(compensationKey, effectKey, runId, process.pid, at);
    })();
  }

  idempotentWrites(): { key: string; runId: string; value: string }[] {
    return this.db.prepare("SELECT key, run_id AS runId, value FROM idempotent_writes ORDER BY key").all() as { key: string; runId: string; value: string }[];
  }

  idempotentAttempts(): Map<string, number> {
    const rows = this.db.prepare("SELECT key, COUNT(*) AS n FROM idempotent_attempts GROUP BY key").all() as { key: string; n: number }[];
    return new Map(rows.map((r) => [r.key, r.n]));
  }

  appends(): AppendRow[] {
    const rows = this.db.prepare("SELECT key, run_id, value, result, pid FROM appends ORDER BY id").all() as { key: string; run_id: string; value: string; result: string; pid: number }[];
    return rows.map((r) => ({ key: r.key, runId: r.run_id, value: r.value, result: JSON.parse(r.result) as Json, pid: r.pid }));
  }

  drafts(): { key: string; runId: string; title: string; pid: number }[] {
    return this.db.prepare("SELECT key, run_id AS runId, title, pid FROM drafts ORDER BY id").all() as { key: string; runId: string; title: string; pid: number }[];
  }

  compensations(): { key: string; effectKey: string; runId: string; pid: number }[] {
    return this.db.prepare("SELECT key, effect_key AS effectKey, run_id AS runId, pid FROM compensations ORDER BY at").all() as {
      key: string;
      effectKey: string;
      runId: string;
      pid: number;
    }[];
  }

  compensationAttempts(): Map<string, number> {
    const rows = this.db.prepare("SELECT key, COUNT(*) AS n FROM compensation_attempts GROUP BY key").all() as { key: string; n: number }[];
    return new Map(rows.map((r) => [r.key, r.n]));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
