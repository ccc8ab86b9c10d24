import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { extname, join, resolve, sep } from "node:path";
import type { Context } from "hono";
import { packageRoot } from "./package-info.js";

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
};

/** `dist/dashboard` of this package if it is built, whether running from `src/` (tsx) or from `dist/src/`. */
export function defaultDashboardDir(): string | undefined {
  const root = packageRoot();
  if (!root) return undefined;
  const candidate = join(root, "dist", "dashboard");
  return existsSync(join(candidate, "index.html")) ? candidate : undefined;
}

/**
 * Serves the built dashboard: a file when one matches the path, else `index.html` so the
 * single-page app handles its own routes. Never reads outside `root`.
 */
export function dashboardHandler(root: string | undefined): (c: Context) => Promise<Response> {
  const base = root ? resolve(root) : undefined;
  return async function serveDashboard(c) {
    if (!base) {
      return c.text("Tether is running. The dashboard is not built (npm run build); the API is at /api/v1.\n", 200);
    }
    let path: string;
    try {
      path = decodeURIComponent(new URL(c.req.url).pathname);
    } catch {
      return c.text("bad path\n", 400);
    }
    const file = resolve(base, `.${path}`);
    if (file !== base && !file.startsWith(base + sep)) return c.text("not found\n", 404);
    const isFile = existsSync(file) && statSync(file).isFile();
    const target = isFile ? file : join(base, "index.html");
    // A missing asset (with an extension) is a 404; any other path is a client-side route.
    if (!isFile && extname(path) !== "" && extname(path) !== ".html") return c.text("not found\n", 404);
    const body = new Uint8Array(await readFile(target));
    const type = contentTypes[extname(target)] ?? "application/octet-stream";
    const cache = target.includes(`${sep}assets${sep}`) ? "public, max-age=31536000, immutable" : "no-cache";
    return c.body(body, 200, { "content-type": type, "cache-control": cache });
  };
}
