import { describe, expect, it } from 'vitest';
import { TurnBatch } from '../../runtime/core/turn-batch.js';

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('TurnBatch', () => {
  it('hands what was added in one turn over together, on the next turn, and starts afresh after', async () => {
    const flushed: number[][] = [];
    const batch = new TurnBatch<number>((items) => flushed.push(items));
    batch.add(1);
    batch.add(2);
    expect(flushed).toEqual([]);
    await nextTurn();
    batch.add(3);
    await nextTurn();
    expect(flushed).toEqual([[1, 2], [3]]);
  });

  it('takes what is added while it flushes into the next batch', async () => {
    const flushed: number[][] = [];
    const batch = new TurnBatch<number>((items) => {
      flushed.push(items);
      if (items[0] === 1) batch.add(10);
    });
    batch.add(1);
    await nextTurn();
    await nextTurn();
    expect(flushed).toEqual([[1], [10]]);
  });
});
