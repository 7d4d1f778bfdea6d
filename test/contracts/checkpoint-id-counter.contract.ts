// The CheckpointIDCounter contract every adapter passes: ids from 1 that only grow, each handed out once
// however many handles (JobMasters, processes) ask at the same moment, a floor that lifts a counter behind
// the store, and counters of different jobs apart.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import type { CheckpointIDCounter } from '../../runtime/ha/checkpoint-id-counter.js';

export interface CheckpointIdCounterFixture {
  readonly counter: CheckpointIDCounter;
  /** Another handle on the same counters (another connection, another process's view). */
  readonly reopen: () => Promise<CheckpointIDCounter>;
}

export function describeCheckpointIdCounterContract(name: string, factory: () => Promise<CheckpointIdCounterFixture>): void {
  describe(`CheckpointIDCounter: ${name}`, () => {
    let fixture: CheckpointIdCounterFixture;
    const opened: CheckpointIDCounter[] = [];
    let n = 0;
    const jobId = (): JobId => JobId.of(`ids-${Date.now().toString(36)}-${n++}`);

    beforeEach(async () => {
      fixture = await factory();
      opened.push(fixture.counter);
    });
    afterEach(async () => {
      for (const c of opened.splice(0)) await c.close();
    });
    const reopen = async (): Promise<CheckpointIDCounter> => {
      const other = await fixture.reopen();
      opened.push(other);
      return other;
    };

    it('hands out 1, 2, 3 … for a job, and shows the next one to another handle', async () => {
      const id = jobId();
      const { counter } = fixture;
      expect(await counter.get(id)).toBe(1);
      expect(await counter.getAndIncrement(id)).toBe(1);
      expect(await counter.getAndIncrement(id)).toBe(2);
      const other = await reopen();
      expect(await other.get(id)).toBe(3);
      expect(await other.getAndIncrement(id)).toBe(3);
      expect(await counter.getAndIncrement(id)).toBe(4);
    });

    it('never hands out the same id twice to handles asking at the same moment', async () => {
      const id = jobId();
      const handles = [fixture.counter, await reopen(), await reopen()];
      const ids = await Promise.all(Array.from({ length: 30 }, (_, i) => handles[i % handles.length]!.getAndIncrement(id)));
      expect(new Set(ids).size).toBe(30);
      expect([...ids].sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      expect(await fixture.counter.get(id)).toBe(31);
    });

    it('starts at the floor when it is behind it (the store holds later checkpoints), and never goes back for a lower one', async () => {
      const id = jobId();
      const { counter } = fixture;
      expect(await counter.getAndIncrement(id)).toBe(1);
      expect(await counter.getAndIncrement(id, 8)).toBe(8);
      expect(await counter.getAndIncrement(id, 3)).toBe(9);
      expect(await counter.getAndIncrement(id)).toBe(10);
      const fresh = jobId();
      expect(await counter.getAndIncrement(fresh, 5)).toBe(5);
      expect(await counter.get(fresh)).toBe(6);
    });

    it('keeps each job its own counter', async () => {
      const [x, y] = [jobId(), jobId()];
      expect(await fixture.counter.getAndIncrement(x)).toBe(1);
      expect(await fixture.counter.getAndIncrement(x)).toBe(2);
      expect(await fixture.counter.getAndIncrement(y)).toBe(1);
      expect(await fixture.counter.get(x)).toBe(3);
    });

    it('refuses a floor that is not a positive integer', async () => {
      await expect(fixture.counter.getAndIncrement(jobId(), 0)).rejects.toThrow(InvalidRequestError);
      await expect(fixture.counter.getAndIncrement(jobId(), 1.5)).rejects.toThrow(/a checkpoint id floor is a positive integer .* found 1.5/);
    });
  });
}
