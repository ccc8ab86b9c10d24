import type { Clock } from "../engine/clock.js";

/**
 * Wakes the simulated model's streams when their next token is due, with one timer per
 * millisecond that has tokens due rather than one per token: a thousand streams at 100 tokens/s
 * are a hundred thousand tokens a second, and a timer and a promise for each were a fifth of
 * what a step cost the benchmark's worker. A real provider's tokens likewise arrive in the
 * socket reads of one turn of the loop, however many streams are open.
 */
export class TokenPacer {
  private readonly slots = new Map<number, (() => void)[]>();

  constructor(private readonly clock: Clock) {}

  /** Calls `wake` once the clock reaches `time` (rounded up to the millisecond). */
  at(time: number, wake: () => void): void {
    const slot = Math.ceil(time);
    const waiting = this.slots.get(slot);
    if (waiting) {
      waiting.push(wake);
      return;
    }
    this.slots.set(slot, [wake]);
    void this.clock.sleep(Math.max(0, slot - this.clock.now())).then(() => this.fire(slot));
  }

  private fire(slot: number): void {
    const waiting = this.slots.get(slot) ?? [];
    this.slots.delete(slot);
    for (const wake of waiting) wake();
  }
}

const pacers = new WeakMap<Clock, TokenPacer>();

/** The pacer every stream on this clock shares. */
export function pacerFor(clock: Clock): TokenPacer {
  let pacer = pacers.get(clock);
  if (!pacer) pacers.set(clock, (pacer = new TokenPacer(clock)));
  return pacer;
}
