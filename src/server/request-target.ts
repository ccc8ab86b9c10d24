import { InvalidInputError } from "../engine/errors.js";

/**
 * Checks the raw request target before any URL parsing can reinterpret it: a path that would be
 * read as something else (a backslash, a `..` segment spelled `%2e%2e`, a NUL, a broken
 * percent-encoding) is refused with a precise message instead of being routed somewhere
 * unexpected or answered with an empty 400.
 */
export function requestTargetProblem(target: string): InvalidInputError | undefined {
  const query = target.indexOf("?");
  const path = query < 0 ? target : target.slice(0, query);
  const shown = JSON.stringify(path.slice(0, 120));
  if (path.includes("\\")) return new InvalidInputError(`the path ${shown} has a raw backslash; ids never contain one (encode it as %5C if you mean it)`);
  for (const segment of path.split("/")) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return new InvalidInputError(`the path ${shown} has a broken percent-encoding in "${segment.slice(0, 60)}"`);
    }
    if (decoded === "." || decoded === "..") {
      if (segment !== decoded) return new InvalidInputError(`the path ${shown} has an encoded "${decoded}" segment; paths are never resolved`);
      return new InvalidInputError(`the path ${shown} has a "${decoded}" segment; paths are never resolved`);
    }
    // Control characters (NUL and friends) never belong in a path.
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(decoded)) return new InvalidInputError(`the path ${shown} has a control character (such as %00)`);
    if (decoded.includes("/") && segment !== decoded) return new InvalidInputError(`the path ${shown} has an encoded slash (%2F) in "${segment.slice(0, 60)}"; ids never contain one`);
  }
  return undefined;
}
