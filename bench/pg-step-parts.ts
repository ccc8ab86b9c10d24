/**
 * Where a PostgreSQL step's time goes against the floor of `bench:scale` (one INSERT of ~1 KB and
 * its commit): the store's own statement for a step written alone (its run row, one journal entry
 * carrying the snapshot, one ~1 KB message), and each of its three row writes as a statement of
 * its own, timed in interleaved rounds on one connection, every statement prepared. No Tether
 * code runs between statements, so what is left of a step's overhead beside these is the
 * worker's own work (the executor, the write's plan, JSON and checksums, the `pg` client).
 *
 * `npm run bench:pg-parts` (PART_STEPS statements a sample, default 1,000; PART_ROUNDS rounds,
 * default 7); the PostgreSQL at TETHER_TEST_DATABASE_URL, in a schema of its own, dropped after.
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { PostgresStore } from "../src/stores/pg-store.js";
import { testDatabaseUrl } from "../src/testing/temp-postgres.js";
import { median } from "./bench-agent.js";

const steps = Number(process.env.PART_STEPS ?? 1000);
const rounds = Number(process.env.PART_ROUNDS ?? 7);

const schema = `bench_parts_${randomBytes(3).toString("hex")}`;
const s = `"${schema}"`;
// The store migrates the schema (the real tables and indexes) and names its statement for a
// step of one journal entry and one message: the text it prepares on every pooled connection.
const store = await new PostgresStore({ connectionString: testDatabaseUrl, schema }).open();
const stepSql = (store as unknown as { singleStepSql(rows: number, messages: number): string }).singleStepSql(1, 1);
await store.close();

const client = new pg.Client({ connectionString: testDatabaseUrl });
await client.connect();
try {
  await client.query(`CREATE TABLE ${s}.floor (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))`);
  // A run row and entries the size the durability benchmark's steps leave: a ~700-byte record,
  // a ~120-byte call entry with a snapshot head, a ~1 KB message.
  const doc = JSON.stringify({ id: "run_parts", agent: "bench", status: "running", pad: "d".repeat(620) });
  await client.query(
    `INSERT INTO ${s}.runs (id, agent, status, created_at, updated_at, lease_until, epoch, version, vars_seq, doc, crc, updated_bucket) VALUES ('run_parts', 'bench', 'running', 1, 1, NULL, 1, 0, 0, $1, 0, 0)`,
    [doc],
  );
  const body = "m".repeat(1030);
  const data = JSON.stringify({ kind: "model", name: "bench", durationMs: 1, usage: { inputTokens: 10, outputTokens: 10 }, resultInMessage: 1 });
  let version = 0;
  let seq = 0;
  let floorSeq = 0;
  const runRow = () => {
    const v = version++;
    const now = Date.now();
    return ["run_parts", v, 1, doc, "running", now, now + 5000, 1, v + 1, 0, 60_000, 1_234_567_890];
  };
  const journalRow = () => {
    seq += 1;
    const now = Date.now();
    return [seq, "call.completed", now, seq, data, seq, seq, seq, "9f".repeat(16), "a1".repeat(16), 1, now, null, null, 987_654_321];
  };
  const runUpdate = `UPDATE ${s}.runs SET doc = $4, status = $5, updated_at = $6, lease_until = $7, epoch = $8, version = $9, vars_seq = $10, updated_bucket = $11, crc = $12 WHERE id = $1 AND version = $2 AND epoch = $3`;
  const journalInsert = `INSERT INTO ${s}.journal (run_id, seq, type, at, call_seq, data, snap_seq, snap_step, msg_count, chain, checksum, schema_version, snap_at, vars, vars_seq, crc)
    VALUES ('run_parts', $1::int, $2::text, $3::bigint, $4::int, $5::text, $6::int, $7::int, $8::int, $9::text, $10::text, $11::int, $12::bigint, $13::text, $14::int, $15::bigint)`;
  const messageInsert = `INSERT INTO ${s}.messages (run_id, idx, body, crc) VALUES ('run_parts', $1::int, $2::text, $3::bigint)`;
  const cases: [name: string, run: () => Promise<unknown>][] = [
    ["floor: one INSERT of ~1 KB", () => client.query({ name: "floor", text: `INSERT INTO ${s}.floor (run_id, seq, body) VALUES ($1, $2, $3)`, values: ["run", floorSeq++, body] })],
    ["a step's statement (run row + entry + message)", () => client.query({ name: "step", text: stepSql, values: [...runRow(), ...journalRow(), seq, body, 42] })],
    ["its run row's UPDATE alone", () => client.query({ name: "run", text: runUpdate, values: runRow() })],
    ["its journal entry's INSERT alone", () => client.query({ name: "journal", text: journalInsert, values: journalRow() })],
    ["its message's INSERT alone", () => client.query({ name: "message", text: messageInsert, values: [++seq, body, 42] })],
  ];
  const samples = new Map<string, number[]>(cases.map(([name]) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of cases) {
      const began = performance.now();
      for (let i = 0; i < steps; i++) await run();
      samples.get(name)!.push(((performance.now() - began) / steps) * 1000);
    }
  }
  const floor = median(samples.get(cases[0][0])!);
  console.log(`A PostgreSQL step's statement and its parts, against the floor (${rounds} interleaved rounds of ${steps}; medians):`);
  for (const [name] of cases) {
    const us = median(samples.get(name)!);
    console.log(`  ${name.padEnd(48)} ${us.toFixed(1).padStart(7)} µs   ${(us / floor).toFixed(2)}× the floor`);
  }
} finally {
  await client.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await client.end();
}
