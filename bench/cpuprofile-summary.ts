/** Summarises a .cpuprofile: self time by function and by file (top N). Usage: tsx bench/cpuprofile-summary.ts FILE [N] */
import { readFileSync } from "node:fs";

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
const profile = JSON.parse(readFileSync(process.argv[2], "utf8")) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const top = Number(process.argv[3] ?? 30);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fn = new Map<string, number>();
const file = new Map<string, number>();
for (const [id, us] of self) {
  const f = byId.get(id)!.callFrame;
  const short = f.url.replace(/^.*\/(node_modules\/[^/]+|src|bench)\//, "$1/");
  fn.set(`${f.functionName || "(anon)"} ${short}:${f.lineNumber + 1}`, (fn.get(`${f.functionName || "(anon)"} ${short}:${f.lineNumber + 1}`) ?? 0) + us);
  file.set(short || f.functionName, (file.get(short || f.functionName) ?? 0) + us);
}
const show = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${(v / 1000).toFixed(0).padStart(6)} ms  ${k}`);
};
show("Self time by function", fn);
show("Self time by file", file);
