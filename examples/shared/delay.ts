/** Sleeps for a tool's simulated latency, stopping early if the call is aborted. */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return signal.aborted ? Promise.reject(signal.reason) : Promise.resolve();
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Simulated tool latency that keeps pace with the model: slower streaming, slower tools; none when streaming flat out. */
export function toolLatencyFor(tokensPerSecond: number, atFortyTokensPerSecondMs: number): number {
  return Number.isFinite(tokensPerSecond) ? Math.min(2 * atFortyTokensPerSecondMs, Math.round((atFortyTokensPerSecondMs * 40) / tokensPerSecond)) : 0;
}
