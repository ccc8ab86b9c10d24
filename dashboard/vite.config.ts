import preact from "@preact/preset-vite";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/** The dashboard, built to `dist/dashboard` and served by `tether serve` at `/`. `vite dev` proxies the API to a local server. */
export default defineConfig({
  root: here("."),
  base: "/",
  plugins: [preact({ devtoolsInProd: false, prefreshEnabled: false })],
  build: {
    outDir: here("../dist/dashboard"),
    emptyOutDir: true,
    target: "es2022",
    reportCompressedSize: true,
  },
  server: {
    proxy: { "/api": process.env.TETHER_URL ?? "http://127.0.0.1:4317" },
  },
});
