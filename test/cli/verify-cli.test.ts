import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/engine/runtime.js";
import { ModelRegistry } from "../../src/models/model-registry.js";
import { effectTool, Ledger, sequenceAgent } from "../../src/testing/index.js";
import { tempPostgres, type TempPostgres } from "../../src/testing/temp-postgres.js";
import { runTether, type CliResult } from "./cli-process.js";

/**
 * `tether verify --database-url` as a user runs it: the real CLI in a child process, against a
 * PostgreSQL schema with runs in it, healthy and then with a byte changed in one run's rows.
 */


let db: TempPostgres | undefined;
afterEach(async () => {
  await db?.cleanup();
  db = undefined;
});

/** Runs `tether …` as a child process, with no store named in the environment but `env`. */
function tether(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const clean = { ...process.env };
  for (const name of ["TETHER_URL", "TETHER_TOKEN", "TETHER_DB", "TETHER_DATABASE_URL"]) delete clean[name];
  return runTether(args, { env: { ...clean, ...env } });
}

const agent = sequenceAgent({
  name: "steps",
  // Slow enough steps that the third run is still running when it is paused after its first.
  tools: [effectTool({ name: "note", ledger: new Ledger(), durationMs: 50 })],
  steps: Array.from({ length: 6 }, (_, i) => ({ tool: "note", input: { id: `note-${i}` } })),
});

/** Two completed runs and one paused, on a schema of their own; the URL names the schema. */
async function schemaWithRuns(): Promise<{ url: string; done: string[]; paused: string }> {
  db = tempPostgres("verifycli");
  const store = await db.open().open();
  const runtime = new Runtime({ agents: [agent], store, resolveModel: new ModelRegistry().resolver, workerPollMs: 10, leaseMs: 300 });
  runtime.startWorker();
  try {
    const done = [(await runtime.start("steps", { n: 0 })).id, (await runtime.start("steps", { n: 1 })).id];
    const paused = (await runtime.start("steps", { n: 2 })).id;
    await runtime.waitFor(paused, (r) => r.step >= 1);
    await runtime.pause(paused, { wait: true });
    for (const id of done) await runtime.waitFor(id, ["completed"]);
    return { url: `${db.url}${db.url.includes("?") ? "&" : "?"}schema=${db.schema}`, done, paused };
  } finally {
    await runtime.close();
  }
}

describe("tether verify --database-url (the real CLI on PostgreSQL)", () => {
  it("a healthy schema: every run read, no damage, exit code 0; the same through TETHER_DATABASE_URL and with --json", async () => {
    const { url } = await schemaWithRuns();
    const run = await tether(["verify", "--database-url", url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("3 runs");
    expect(run.stderr).toContain("no damage");
    expect(run.stderr).toContain(`schema ${db!.schema}`);

    const json = await tether(["verify", "--json"], { TETHER_DATABASE_URL: url });
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ runs: 3, damage: [], damagedRuns: [] });
  }, 60_000);

  it("a byte changed in one run's record: that run named, exit code 5 (store_corrupt), nothing changed", async () => {
    const { url, done } = await schemaWithRuns();
    const client = new pg.Client({ connectionString: db!.url });
    await client.connect();
    try {
      const s = `"${db!.schema}"`;
      const { doc } = (await client.query<{ doc: string }>(`SELECT doc FROM ${s}.runs WHERE id = $1`, [done[1]])).rows[0];
      const damaged = doc.replace('"output":6', '"output":7');
      expect(damaged).not.toBe(doc);
      await client.query(`UPDATE ${s}.runs SET doc = $2 WHERE id = $1`, [done[1], damaged]);

      const run = await tether(["verify", "--database-url", url]);
      expect(run.code, run.stderr).toBe(5);
      expect(run.stdout.trim()).toBe(`${done[1]}\trun row\tfails its checksum`);
      expect(run.stderr).toContain("1 damaged (1 runs), 2 runs intact");
      expect(run.stderr).toContain(done[1]);
      expect((await client.query<{ doc: string }>(`SELECT doc FROM ${s}.runs WHERE id = $1`, [done[1]])).rows[0].doc).toBe(damaged);
    } finally {
      await client.end();
    }
  }, 60_000);

  it("a schema with no Tether store: a store error (exit code 1), not a report of damage", async () => {
    db = tempPostgres("verifycli");
    const run = await tether(["verify", "--database-url", `${db.url}${db.url.includes("?") ? "&" : "?"}schema=${db.schema}`]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("no Tether store");
  }, 60_000);
});
