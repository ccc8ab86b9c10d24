import type { Json } from "../engine/json.js";
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

const sampleWords = ["alpha", "budget", "cache", "draft", "engine", "filter", "graph", "index", "latency", "market", "signal", "vector"];

/** A value that fits a JSON Schema (the subset tools use), for simulated tool arguments. */
export function sampleFromSchema(schema: Json, random: Random, depth = 0): Json {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return null;
  const s = schema as Record<string, Json>;
  if (Array.isArray(s.enum) && s.enum.length) return pick(random, s.enum);
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.anyOf) && s.anyOf.length) return sampleFromSchema(s.anyOf[0], random, depth);
  switch (s.type) {
    case "string": {
      const n = 1 + Math.floor(random() * 3);
      return Array.from({ length: n }, () => pick(random, sampleWords)).join(" ");
    }
    case "integer":
    case "number": {
      const min = typeof s.minimum === "number" ? s.minimum : 1;
      const max = typeof s.maximum === "number" ? s.maximum : min + 9;
      const value = min + random() * (max - min);
      return s.type === "integer" ? Math.round(value) : Math.round(value * 100) / 100;
    }
    case "boolean":
      return random() < 0.5;
    case "array": {
      if (depth > 3) return [];
      const n = typeof s.minItems === "number" ? Math.max(1, s.minItems) : 1 + Math.floor(random() * 2);
      return Array.from({ length: n }, () => sampleFromSchema(s.items ?? null, random, depth + 1));
    }
    case "object": {
      const properties = (s.properties ?? {}) as Record<string, Json>;
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : Object.keys(properties));
      const result: Record<string, Json> = {};
      for (const [key, value] of Object.entries(properties)) {
        if (required.has(key) && depth <= 3) result[key] = sampleFromSchema(value, random, depth + 1);
      }
      return result;
    }
    default:
      return null;
  }
}
