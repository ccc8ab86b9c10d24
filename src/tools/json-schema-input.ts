import { z } from "zod";
import type { Json } from "../engine/json.js";

/**
 * A zod schema for a tool input given as JSON Schema (MCP tools, AI SDK `jsonSchema()` tools),
 * so the gate validates arguments before the call and a model gets `invalid_input` back.
 * A schema zod cannot convert falls back to "any object": the server still validates it.
 */
export function inputSchemaFromJsonSchema(schema: Json): { schema: z.ZodType<Record<string, unknown>>; exact: boolean } {
  try {
    return { schema: z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]) as z.ZodType<Record<string, unknown>>, exact: true };
  } catch {
    return { schema: z.record(z.string(), z.unknown()), exact: false };
  }
}
