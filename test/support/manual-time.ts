// Time in tests on a ManualClock: letting what a step set off run to its end, and advancing the clock in
// small steps so that each timer fires at its own time and what it set off runs before the next.
import type { ManualClock } from '../../runtime/core/clock.js';

/** Lets queued promise callbacks and immediates run (20 turns of the event loop). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/** Advances `clock` by `ms` in steps of 10 ms, settling after each. */
export async function advanceInSteps(clock: ManualClock, ms: number): Promise<void> {
  for (let done = 0; done < ms; done += 10) {
    clock.advance(Math.min(10, ms - done));
    await settle();
  }
}
