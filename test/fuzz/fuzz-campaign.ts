/**
 * `npm run fuzz`: the API fuzz as a campaign. FUZZ_RUNS (default 5000) requests from FUZZ_SEED
 * (default: the time); prints requests fuzzed and violations, exits 1 if there is any.
 */
import { fuzzApi } from "./api-fuzz.js";
import { fuzzServer } from "./fuzz-server.js";

const runs = Number(process.env.FUZZ_RUNS ?? 5000);
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const server = await fuzzServer();
const started = performance.now();
const report = await fuzzApi(server.target, server.routes, { runs, seed });
await server.close();
console.log(`api fuzz: ${report.requests} requests over ${server.routes.length} routes (seed ${seed}) in ${((performance.now() - started) / 1000).toFixed(1)} s; violations: ${report.violations.length}`);
for (const violation of report.violations.slice(0, 20)) console.log(`  ${violation}`);
if (report.violations.length) process.exitCode = 1;
