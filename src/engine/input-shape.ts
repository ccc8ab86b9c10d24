import { z } from "zod";

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  additionalProperties?: boolean | JsonSchema;
};

/**
 * A short, TypeScript-like description of what a schema accepts, for error messages:
 * `string | { prompt: string; depth?: number }`. Falls back to `unknown` for what JSON Schema
 * cannot express.
 */
export function describeShape(schema: z.ZodType): string {
  try {
    return shapeOf(z.toJSONSchema(schema, { unrepresentable: "any", io: "input" }) as JsonSchema, 0);
  } catch {
    return "unknown";
  }
}

function shapeOf(schema: JsonSchema, depth: number): string {
  if (depth > 4) return "…";
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) return variants.map((v) => shapeOf(v, depth + 1)).join(" | ");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type;
  if (type === "array") return `${wrap(shapeOf(schema.items ?? {}, depth + 1))}[]`;
  if (type === "object" || schema.properties) {
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties ?? {}).map(([name, field]) => `${name}${required.has(name) ? "" : "?"}: ${shapeOf(field, depth + 1)}`);
    return fields.length ? `{ ${fields.join("; ")} }` : "object";
  }
  if (type === "integer") return "integer";
  return type ?? "unknown";
}

function wrap(shape: string): string {
  return shape.includes(" | ") ? `(${shape})` : shape;
}
