import { pick, type Random } from "./seeded-random.js";

const subjects = ["the sources", "the evidence", "the draft", "the results", "the findings", "the data", "the plan", "the workspace", "the page", "the report"];
const verbs = ["suggest", "confirm", "indicate", "show", "point to", "support", "contradict", "refine", "narrow", "clarify"];
const objects = [
  "a consistent trend",
  "two open questions",
  "a gap in coverage",
  "the main trade-off",
  "a likely cause",
  "the next step",
  "an edge case worth checking",
  "the key constraint",
  "a simpler approach",
  "a useful comparison",
];
const openers = ["Looking at this,", "So far,", "Next,", "On balance,", "To be thorough,", "Before going on,", "Checking again,"];

/** Plausible prose for a simulated agent, deterministic for a given random source. */
export function sentence(random: Random): string {
  return `${pick(random, openers)} ${pick(random, subjects)} ${pick(random, verbs)} ${pick(random, objects)}.`;
}

export function paragraph(random: Random, sentences: number): string {
  return Array.from({ length: sentences }, () => sentence(random)).join(" ");
}
