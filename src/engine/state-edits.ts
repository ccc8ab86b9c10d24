import type { AgentDefinition } from "./agent.js";
import { InvalidStatePatchError } from "./errors.js";
import type { Json, JsonObject } from "./json.js";
import type { AgentState } from "./state.js";

/** A person's patch of a paused run's state: a JSON merge patch (RFC 7386) of `vars`. */
export interface StatePatch {
  vars: JsonObject;
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function mergePatch(target: Json, patch: Json): Json {
  if (!isPlainObject(patch)) return patch;
  const result: JsonObject = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key] ?? null, value);
  }
  return result;
}

/** Validates the patch's shape and the patched vars against the agent's schema; never mutates `state`. */
export function applyStatePatch(agent: AgentDefinition | undefined, state: AgentState, patch: unknown): JsonObject {
  if (!isPlainObject(patch)) throw new InvalidStatePatchError("a state patch must be an object like {\"vars\": {...}}");
  const unknownKeys = Object.keys(patch).filter((k) => k !== "vars");
  if (unknownKeys.length) throw new InvalidStatePatchError(`a state patch may only change "vars" (unknown: ${unknownKeys.join(", ")})`);
  if (!isPlainObject(patch.vars)) throw new InvalidStatePatchError("patch.vars must be an object (a JSON merge patch of the vars)");
  const vars = mergePatch(state.vars, patch.vars) as JsonObject;
  if (agent?.vars) {
    const checked = agent.vars.safeParse(vars);
    if (!checked.success) {
      const issues = checked.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
      throw new InvalidStatePatchError(`the patched vars do not match agent ${agent.name}'s schema: ${issues.map((i) => `${i.path || "(vars)"}: ${i.message}`).join("; ")}`, issues);
    }
  }
  return vars;
}

export function validateMessage(content: unknown): string {
  if (typeof content !== "string" || content.trim() === "") throw new InvalidStatePatchError("a message for the agent must be a non-empty string");
  if (content.length > 100_000) throw new InvalidStatePatchError("a message for the agent must be at most 100000 characters");
  return content;
}
