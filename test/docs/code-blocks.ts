import { readFileSync } from "node:fs";

export interface CodeBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
}

/**
 * The fenced TypeScript blocks of a Markdown file that are meant to run: every ```ts block
 * except those whose info string says `fragment` (a piece of a larger program, shown for reading).
 */
export function runnableBlocks(file: string): CodeBlock[] {
  const lines = readFileSync(file, "utf8").split("\n");
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S+)(.*)$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    if (end < 0) break;
    const [lang, info] = [open[1], open[2]];
    if ((lang === "ts" || lang === "typescript") && !/\bfragment\b/.test(info)) blocks.push({ file, line: i + 1, lang, code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return blocks;
}
