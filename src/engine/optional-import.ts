import { createRequire } from "node:module";
import { MissingDependencyError } from "./errors.js";

/**
 * The optional peer dependencies: features that need one load it through `optionalImport` (or
 * `optionalRequire` where the caller is synchronous), so `npm install tether-runtime` pulls only
 * the core and a missing package is a `missing_dependency` error naming what to install. The
 * ranges match `peerDependencies` in package.json (a test compares them).
 */
export const optionalPeers = {
  "@ai-sdk/anthropic": "^3.0.0",
  "@ai-sdk/openai": "^3.0.0",
  "@ai-sdk/openai-compatible": "^2.0.0",
  "@modelcontextprotocol/sdk": "^1.32.0",
  "@opentelemetry/api": "^1.9.0",
  ai: "^6.0.0",
  pg: "^8.16.0",
  "playwright-core": "^1.65.0",
  tsx: "^4.23.0",
} as const;

export type OptionalPeer = keyof typeof optionalPeers;

/** `@scope/name/sub/path.js` → `@scope/name`; `name/sub` → `name`. */
export function packageNameOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** What to pass to `npm install`: the package with the major range Tether is tested with. */
export function installSpec(packageName: string): string {
  const range = (optionalPeers as Record<string, string>)[packageName];
  const major = range?.match(/^\^(\d+)\./)?.[1];
  return major ? `${packageName}@${major}` : packageName;
}

/** The module itself could not be found (not: it was found and threw while loading). */
function isNotFound(error: unknown, packageName: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") return message.includes(packageName);
  // Vite's module runner (vitest) reports a bare specifier it cannot resolve in its own words.
  return /Cannot find (package|module)|Failed to (load|resolve)/i.test(message) && message.includes(packageName);
}

/**
 * `await import(specifier)`, or a `MissingDependencyError` (code `missing_dependency`) saying
 * that `feature` needs the package and the `npm install` command that adds it. Call it where
 * the feature is used, never at module top level, so the core loads without the package.
 */
export async function optionalImport<T>(specifier: string, feature: string): Promise<T> {
  const name = packageNameOf(specifier);
  try {
    return (await import(specifier)) as T;
  } catch (error) {
    if (isNotFound(error, name)) throw new MissingDependencyError(name, feature, installSpec(name), error);
    throw error;
  }
}

const requireHere = createRequire(import.meta.url);

/** `optionalImport` for a synchronous caller: the package must offer a CommonJS entry (`require` condition). */
export function optionalRequire<T>(specifier: string, feature: string): T {
  const name = packageNameOf(specifier);
  try {
    return requireHere(specifier) as T;
  } catch (error) {
    if (isNotFound(error, name)) throw new MissingDependencyError(name, feature, installSpec(name), error);
    throw error;
  }
}

/** Whether `specifier` resolves from here, without loading it; a missing one throws `MissingDependencyError`. */
export function requireInstalled(specifier: string, feature: string): void {
  const name = packageNameOf(specifier);
  try {
    const resolve = (import.meta as { resolve?: (specifier: string) => string }).resolve;
    if (typeof resolve === "function") resolve(specifier);
    else requireHere.resolve(specifier);
  } catch (error) {
    if (isNotFound(error, name)) throw new MissingDependencyError(name, feature, installSpec(name), error);
    throw error;
  }
}
