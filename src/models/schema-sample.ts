import type { Json } from "../engine/json.js";
import { pick, type Random } from "./seeded-random.js";

/**
 * A value valid for a JSON Schema, drawn with a seeded random source: the arguments the simulated
 * model invents for a tool. It covers what tool schemas use (what zod's `toJSONSchema` writes):
 * types and type lists, `enum`/`const`, `anyOf`/`oneOf`/`allOf`, string formats (uri, email,
 * uuid, date-time, date, time, ipv4, ipv6, hostname), lengths, `pattern` (its common regular
 * expression subset), number bounds (exclusive too) and `multipleOf`, array bounds and tuples,
 * objects with required properties and records. A plain schema keeps the draws it always had, so a
 * seeded trace stays the same.
 */
export function sampleFromSchema(schema: Json, random: Random, depth = 0): Json {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return null;
  const s = schema as Record<string, Json>;
  if (Array.isArray(s.enum) && s.enum.length) return pick(random, s.enum);
  if (s.const !== undefined) return s.const;
  const variants = (Array.isArray(s.anyOf) && s.anyOf.length ? s.anyOf : Array.isArray(s.oneOf) && s.oneOf.length ? s.oneOf : undefined) as Json[] | undefined;
  // A value, not a null, when the schema allows both (an optional argument a model would fill).
  if (variants) return sampleFromSchema(variants.find((v) => !isNullSchema(v)) ?? variants[0], random, depth);
  if (Array.isArray(s.allOf) && s.allOf.length) return sampleFromSchema(mergeAll(s, s.allOf as Json[]), random, depth);
  switch (typeOf(s)) {
    case "string":
      return sampleString(s, random);
    case "integer":
    case "number":
      return sampleNumber(s, typeOf(s) === "integer", random);
    case "boolean":
      return random() < 0.5;
    case "null":
      return null;
    case "array":
      return sampleArray(s, random, depth);
    case "object":
      return sampleObject(s, random, depth);
    default:
      return null;
  }
}

const sampleWords = ["alpha", "budget", "cache", "draft", "engine", "filter", "graph", "index", "latency", "market", "signal", "vector"];

function typeOf(s: Record<string, Json>): string | undefined {
  if (typeof s.type === "string") return s.type;
  if (Array.isArray(s.type)) return (s.type.find((t) => t !== "null") ?? s.type[0]) as string | undefined;
  if (s.properties || s.additionalProperties) return "object";
  if (s.items || s.prefixItems) return "array";
  return undefined;
}

function isNullSchema(schema: Json): boolean {
  return typeof schema === "object" && schema !== null && !Array.isArray(schema) && schema.type === "null";
}

/** `allOf` as one schema: the parts' keywords, their properties and required lists joined. */
function mergeAll(base: Record<string, Json>, parts: Json[]): Json {
  const merged: Record<string, Json> = { ...base, allOf: null };
  delete merged.allOf;
  const properties: Record<string, Json> = { ...((base.properties as Record<string, Json> | undefined) ?? {}) };
  const required = new Set<string>(Array.isArray(base.required) ? (base.required as string[]) : []);
  for (const part of parts) {
    if (typeof part !== "object" || part === null || Array.isArray(part)) continue;
    Object.assign(merged, part);
    Object.assign(properties, (part.properties as Record<string, Json> | undefined) ?? {});
    for (const name of Array.isArray(part.required) ? (part.required as string[]) : []) required.add(name);
  }
  if (Object.keys(properties).length) merged.properties = properties;
  if (required.size) merged.required = [...required];
  return merged;
}

const formats: Record<string, (random: Random) => string> = {
  uri: (random) => `https://example.com/${pick(random, sampleWords)}`,
  url: (random) => `https://example.com/${pick(random, sampleWords)}`,
  "uri-reference": (random) => `/${pick(random, sampleWords)}`,
  email: (random) => `${pick(random, sampleWords)}@example.com`,
  uuid: (random) => {
    const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join("");
    return `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(random, ["8", "9", "a", "b"])}${hex(3)}-${hex(12)}`;
  },
  "date-time": (random) => isoDay(random).toISOString(),
  date: (random) => isoDay(random).toISOString().slice(0, 10),
  time: (random) => `${String(Math.floor(random() * 24)).padStart(2, "0")}:${String(Math.floor(random() * 60)).padStart(2, "0")}:00`,
  ipv4: (random) => `192.0.2.${1 + Math.floor(random() * 254)}`,
  ipv6: (random) => `2001:db8::${(1 + Math.floor(random() * 0xfffe)).toString(16)}`,
  hostname: (random) => `${pick(random, sampleWords)}.example.com`,
  duration: (random) => `P${1 + Math.floor(random() * 30)}D`,
};

/** A day in 2026, at midnight UTC: a fixed year, so a seed gives the same date on any day it runs. */
function isoDay(random: Random): Date {
  return new Date(Date.UTC(2026, 0, 1) + Math.floor(random() * 365) * 86_400_000);
}

function sampleString(s: Record<string, Json>, random: Random): string {
  const format = typeof s.format === "string" ? formats[s.format] : undefined;
  if (format) return format(random);
  const pattern = typeof s.pattern === "string" ? s.pattern : undefined;
  if (pattern !== undefined) {
    const matched = stringForPattern(pattern, random);
    if (matched !== undefined) return matched;
  }
  const n = 1 + Math.floor(random() * 3);
  let text = Array.from({ length: n }, () => pick(random, sampleWords)).join(" ");
  const min = typeof s.minLength === "number" ? s.minLength : 0;
  const max = typeof s.maxLength === "number" ? s.maxLength : Infinity;
  while (text.length < min) text += ` ${pick(random, sampleWords)}`;
  if (text.length > max) text = text.slice(0, max);
  return text;
}

/** Integers beyond this are a type's limits (zod writes ±2^53 for `.int()`), not a range anyone means. */
const sensibleBound = 1e9;

function sampleNumber(s: Record<string, Json>, integer: boolean, random: Random): number {
  const bound = (value: Json | undefined) => (typeof value === "number" && Math.abs(value) < sensibleBound ? value : undefined);
  const step = integer ? 1 : 0.01;
  const exclusiveMin = bound(s.exclusiveMinimum);
  const exclusiveMax = bound(s.exclusiveMaximum);
  let low = bound(s.minimum) ?? (exclusiveMin !== undefined ? exclusiveMin + step : undefined);
  let high = bound(s.maximum) ?? (exclusiveMax !== undefined ? exclusiveMax - step : undefined);
  if (typeof s.minimum === "number" && typeof s.maximum === "number" && low === undefined && high === undefined) {
    // Only the type's limits: a small positive number, within them.
    low = Math.max(s.minimum, 1);
    high = Math.min(s.maximum, low + 9);
  }
  low ??= high !== undefined && high < 1 ? high - 9 : 1;
  high ??= low + 9;
  if (integer) {
    low = Math.ceil(low);
    high = Math.floor(high);
  }
  let value = low + random() * (high - low);
  value = integer ? Math.round(value) : Math.round(value * 100) / 100;
  const multipleOf = typeof s.multipleOf === "number" && s.multipleOf > 0 ? s.multipleOf : undefined;
  if (multipleOf !== undefined) {
    const k = Math.ceil(low / multipleOf) + Math.floor(random() * Math.max(1, Math.floor((high - low) / multipleOf)));
    value = Number((k * multipleOf).toPrecision(12));
  }
  if (exclusiveMin !== undefined && value <= exclusiveMin) value = integer ? exclusiveMin + 1 : exclusiveMin + step;
  if (exclusiveMax !== undefined && value >= exclusiveMax) value = integer ? exclusiveMax - 1 : exclusiveMax - step;
  return Math.min(Math.max(value, low), high);
}

function sampleArray(s: Record<string, Json>, random: Random, depth: number): Json[] {
  const prefix = Array.isArray(s.prefixItems) ? (s.prefixItems as Json[]) : [];
  if (depth > 3) return prefix.map(() => null);
  const min = typeof s.minItems === "number" ? s.minItems : undefined;
  const max = typeof s.maxItems === "number" ? s.maxItems : Infinity;
  let n = min !== undefined ? Math.max(1, min) : 1 + Math.floor(random() * 2);
  n = Math.max(Math.min(n, max), prefix.length);
  const items = s.items === false ? null : (s.items ?? null);
  return Array.from({ length: n }, (_, i) => sampleFromSchema(i < prefix.length ? prefix[i] : items, random, depth + 1));
}

function sampleObject(s: Record<string, Json>, random: Random, depth: number): Record<string, Json> {
  const properties = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : Object.keys(properties));
  const result: Record<string, Json> = {};
  for (const [key, value] of Object.entries(properties)) {
    if (required.has(key) && depth <= 3) result[key] = sampleFromSchema(value, random, depth + 1);
  }
  const extra = s.additionalProperties;
  if (!Object.keys(properties).length && typeof extra === "object" && extra !== null && depth <= 3) {
    result[pick(random, sampleWords)] = sampleFromSchema(extra, random, depth + 1);
  }
  return result;
}

/**
 * A string matching a regular expression, for the subset tool schemas use: anchors, literals,
 * escapes (`\d`, `\w`, `\s`, `\.`), classes (`[A-Z0-9_-]`, `[^…]` is skipped), groups with
 * alternatives, and the quantifiers `?`, `*`, `+`, `{n}`, `{n,m}`. Undefined when the pattern uses
 * more (lookarounds, backreferences) or the result does not match after all.
 */
export function stringForPattern(pattern: string, random: Random): string | undefined {
  let regex: RegExp;
  try {
    regex = new RegExp(pattern, "u");
  } catch {
    return undefined;
  }
  try {
    const parser = new PatternWriter(pattern, random);
    const text = parser.alternatives();
    return parser.done() && regex.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}

class PatternWriter {
  private at = 0;
  constructor(
    private readonly pattern: string,
    private readonly random: Random,
  ) {}

  done(): boolean {
    return this.at >= this.pattern.length;
  }

  alternatives(): string {
    const options: string[] = [this.sequence()];
    while (this.pattern[this.at] === "|") {
      this.at++;
      options.push(this.sequence());
    }
    return options[0];
  }

  private sequence(): string {
    let out = "";
    while (this.at < this.pattern.length && this.pattern[this.at] !== "|" && this.pattern[this.at] !== ")") {
      const atom = this.atom();
      if (atom === undefined) continue;
      const [min, max] = this.quantifier();
      const count = min + Math.floor(this.random() * (Math.min(max, min + 2) - min + 1));
      for (let i = 0; i < count; i++) out += atom();
    }
    return out;
  }

  /** One atom as a writer of one occurrence; undefined for an anchor. */
  private atom(): (() => string) | undefined {
    const c = this.pattern[this.at++];
    if (c === "^" || c === "$") return undefined;
    if (c === "(") {
      if (this.pattern[this.at] === "?") {
        if (this.pattern[this.at + 1] !== ":") throw new Error("unsupported group");
        this.at += 2;
      }
      const start = this.at;
      this.alternatives();
      if (this.pattern[this.at++] !== ")") throw new Error("unclosed group");
      const inner = this.pattern.slice(start, this.at - 1);
      return () => {
        const writer = new PatternWriter(inner, this.random);
        return writer.alternatives();
      };
    }
    if (c === "[") return this.characterClass();
    if (c === "\\") return this.escape();
    if (c === ".") return () => pick(this.random, [..."abcdefghijklmnopqrstuvwxyz"]);
    if ("*+?{".includes(c)) throw new Error("a quantifier with nothing before it");
    return () => c;
  }

  private escape(): () => string {
    const e = this.pattern[this.at++];
    const sets: Record<string, string> = { d: "0123456789", w: "abcdefghijklmnopqrstuvwxyz0123456789_", s: " " };
    if (sets[e]) return () => pick(this.random, [...sets[e]]);
    if (/[A-Za-z0-9]/.test(e)) throw new Error(`unsupported escape \\${e}`);
    return () => e;
  }

  private characterClass(): () => string {
    if (this.pattern[this.at] === "^") throw new Error("negated class");
    const chars: string[] = [];
    while (this.pattern[this.at] !== "]") {
      if (this.at >= this.pattern.length) throw new Error("unclosed class");
      let c = this.pattern[this.at++];
      if (c === "\\") {
        const e = this.pattern[this.at++];
        const sets: Record<string, string> = { d: "0123456789", w: "abcdefghijklmnopqrstuvwxyz0123456789_", s: " " };
        if (sets[e]) {
          chars.push(...sets[e]);
          continue;
        }
        c = e;
      }
      if (this.pattern[this.at] === "-" && this.pattern[this.at + 1] !== "]" && this.at + 1 < this.pattern.length) {
        const end = this.pattern[this.at + 1];
        this.at += 2;
        for (let code = c.charCodeAt(0); code <= end.charCodeAt(0); code++) chars.push(String.fromCharCode(code));
      } else chars.push(c);
    }
    this.at++;
    if (!chars.length) throw new Error("empty class");
    return () => pick(this.random, chars);
  }

  private quantifier(): [number, number] {
    const c = this.pattern[this.at];
    if (c === "?") return this.lazy(0, 1);
    if (c === "*") return this.lazy(0, 3);
    if (c === "+") return this.lazy(1, 3);
    if (c === "{") {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(this.pattern.slice(this.at));
      if (!match) throw new Error("bad quantifier");
      const min = Number(match[1]);
      const max = match[2] === undefined ? min : match[3] ? Number(match[3]) : min + 3;
      this.at += match[0].length - 1;
      return this.lazy(min, max);
    }
    return [1, 1];
  }

  private lazy(min: number, max: number): [number, number] {
    this.at++;
    if (this.pattern[this.at] === "?") this.at++;
    return [min, max];
  }
}
