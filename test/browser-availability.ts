import { existsSync } from "node:fs";

/**
 * Whether the browser suites can run here. They need a Chromium (Debian's package, or the path in
 * TETHER_CHROMIUM / CHROMIUM_PATH). Without one they skip, and the run's summary says what to
 * install; under CI=true they run anyway, so a missing browser is a failure there.
 */
export const chromiumPath = process.env.TETHER_CHROMIUM ?? process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const hasChromium = existsSync(chromiumPath);
export const runBrowserSuites = hasChromium || process.env.CI === "true";
export const missingBrowserLine = `browser suites skipped: no Chromium at ${chromiumPath} (apt-get install chromium, or set TETHER_CHROMIUM to its path)`;
