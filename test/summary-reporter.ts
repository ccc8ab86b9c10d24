import type { Reporter, TestModule } from "vitest/node";
import { hasChromium, missingBrowserLine, runBrowserSuites } from "./browser-availability.js";

/**
 * Ends the run with one plain line, "vitest (node vX.Y.Z): N passed, N failed, N skipped", that any
 * CI can read, preceded by one line saying so when the browser suites were skipped for want of Chromium.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed += 1;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failed += 1;
        else skipped += 1;
      }
    }
    if (!hasChromium && !runBrowserSuites) process.stdout.write(`\n${missingBrowserLine}`);
    process.stdout.write(`\nvitest (node ${process.version}): ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
