import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/** The dashboard's unit tests (pure logic: journal folding, patches). The browser suite is test/browser. */
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: { include: ["dashboard/src/**/*.test.ts"], environment: "node" },
});
