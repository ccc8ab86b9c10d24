import type { Json } from "../api/types.js";

/** A one-line preview of what a run was asked: the prompt of a tool-loop agent, else the input as JSON. */
export function inputPreview(input: Json): string {
  if (typeof input === "string") return input;
  if (input && typeof input === "object" && !Array.isArray(input) && typeof input.prompt === "string") return input.prompt;
  return JSON.stringify(input);
}

/** What a person typed as a run's input: JSON when it parses as an object or array, else the text itself. */
export function parseInput(text: string): Json {
  const trimmed = text.trim();
  if (/^[[{]/.test(trimmed)) {
    try {
      return JSON.parse(trimmed) as Json;
    } catch {
      return text;
    }
  }
  return text;
}
