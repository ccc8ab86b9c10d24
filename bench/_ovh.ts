import { createTether } from "../src/index.js";
import { PostgresStore } from "../src/stores/pg-store.js";
import { baselineLoop, benchAgent, instantModel, runDurable } from "./bench-agent.js";
import pg from "pg";
let qms = 0, qn = 0, other = 0;
const orig = pg.Pool.prototype.query;
(pg.Pool.prototype as any).query = async function (this: any, ...args: any[]) { const b = performance.now(); try { return await (orig as any).apply(this, args); } finally { const t = performance.now() - b; if (String(args[0]?.text ?? args[0]).includes("json_to_recordset")) { qms += t; qn++; } else other += t; } };
let cms = 0, cn = 0;
const corig = pg.Client.prototype.query;
(pg.Client.prototype as any).query = function (this: any, ...args: any[]) { const b = performance.now(); const last = args[args.length - 1]; if (typeof last === "function" && String(args[0]?.text ?? "").includes("json_to_recordset")) args[args.length - 1] = (...a: any[]) => { cms += performance.now() - b; cn++; return last(...a); }; const r = (corig as any).apply(this, args); if (r && typeof r.then === "function" && String(args[0]?.text ?? "").includes("json_to_recordset")) r.then(() => { cms += performance.now() - b; cn++; }, () => undefined); return r; };
const url = "postgres://postgres@127.0.0.1:5432/test";
const schema = "ovh_" + Date.now();
const steps = Number(process.env.STEPS ?? 1000);
const store = await new PostgresStore({ connectionString: url, schema }).open();
const agent = benchAgent("b", instantModel, steps);
const rt = createTether({ agents: [agent], store, secrets: false });
for (let i = 0; i < 5; i++) await runDurable(rt, "b");
const c = new pg.Client({ connectionString: url }); await c.connect();
await c.query(`CREATE TABLE ${schema}.floor (run_id text, seq int, body text, primary key (run_id, seq))`);
let seq = 0; const body = "x".repeat(1000);
async function floor() { const b = performance.now(); for (let i = 0; i < 2000; i++) await c.query({ name: "f", text: `INSERT INTO ${schema}.floor VALUES ($1,$2,$3)`, values: ["r", seq++, body] }); return (performance.now() - b) / 2000 * 1000; }
await floor();
for (let i = 0; i < 3; i++) {
  const base = await baselineLoop(agent, instantModel);
  qms = 0; qn = 0; other = 0;
  const d = await runDurable(rt, "b");
  console.log(`client ${(cms / cn * 1000).toFixed(1)} x ${cn}`); cms = 0; cn = 0;
  console.log(`step stmt ${(qms / qn * 1000).toFixed(1)} µs x ${qn}, other ${other.toFixed(1)} ms`);
  const f = await floor();
  const o = (d.ms - base) / steps * 1000;
  console.log(`base ${(base / steps * 1000).toFixed(1)} µs/step overhead ${o.toFixed(1)} floor ${f.toFixed(1)} ratio ${(o / f).toFixed(2)}`);
}
await c.query(`DROP SCHEMA ${schema} CASCADE`); await c.end();
await rt.close(); await store.close();
