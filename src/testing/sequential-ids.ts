import type { IdGenerator } from "../engine/ids.js";

/** Ids that repeat from run to run; give each runtime sharing a store its own `scope`. */
export function sequentialIds(scope = "t"): IdGenerator {
  let next = 0;
  return (prefix) => `${prefix}_${scope}${String(++next).padStart(6, "0")}`;
}
