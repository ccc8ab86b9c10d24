import type { Json, JsonObject } from "../api/types.js";

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The JSON merge patch (RFC 7386) that turns `before` into `after`: changed keys set, removed
 * keys null, nested objects patched key by key. Empty when nothing changed.
 */
export function mergePatchBetween(before: JsonObject, after: JsonObject): JsonObject {
  const patch: JsonObject = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) {
    const old = before[key];
    if (isObject(old) && isObject(value)) {
      const inner = mergePatchBetween(old, value);
      if (Object.keys(inner).length) patch[key] = inner;
    } else if (JSON.stringify(old) !== JSON.stringify(value)) patch[key] = value;
  }
  return patch;
}
