import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "examples/**/*.test.ts", "test/**/*.test.ts", "dashboard/src/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
