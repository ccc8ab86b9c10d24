/** Polls `condition` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitUntil<T>(condition: () => T | undefined | false | Promise<T | undefined | false>, options: { timeoutMs?: number; what?: string } = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${options.what ?? "a condition"}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
