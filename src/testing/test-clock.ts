import { systemClock, type Clock } from "../engine/clock.js";

/** Real time shifted by an offset a test moves forward: staleness and leases without waiting. */
export class TestClock implements Clock {
  private offsetMs: number;
  /** Every `sleep` asked of this clock, in milliseconds: what the engine waited for, exactly. */
  readonly sleeps: number[] = [];

  constructor(offsetMs = 0) {
    this.offsetMs = offsetMs;
  }

  now(): number {
    return Date.now() + this.offsetMs;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return systemClock.sleep(ms, signal);
  }

  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
