// How a producer's window combiner sends its partials into a hash partition: in batches
// `[PARTIAL_BATCH, keys, partials]` of at most 256 pairs, each batch's keys owned by the one subpartition
// it goes to, every pair once and in order per subpartition; a pair the codec cannot carry is refused.
import { describe, expect, it } from 'vitest';
import { canonicalKey, keyGroupOf, subtaskForKeyGroup } from '../../runtime/network/key-groups.js';
import type { ResultPartition } from '../../runtime/network/result-partition.js';
import { RecordEncodingError } from '../../runtime/network/record-check.js';
import type { TaskSignal } from '../../runtime/core/cancellation.js';
import { windowPartialsSender } from '../../runtime/task/output-writer.js';
import { PARTIAL_BATCH } from '../../runtime/task/window-combiner.js';

const KEY_GROUPS = 128;
const SUBPARTITIONS = 3;
const owner = (canonical: string): number => subtaskForKeyGroup(keyGroupOf(canonical, KEY_GROUPS), SUBPARTITIONS, KEY_GROUPS);

/** A hash partition that keeps what it is given: per emit, the subpartition the routing key picks, the record and its timestamp. */
function keepingPartition() {
  const emitted: { sub: number; record: unknown[]; timestamp: number | undefined }[] = [];
  const partition = {
    numberOfSubpartitions: SUBPARTITIONS,
    subpartitionOfKey: owner,
    emitToKey: (canonical: string, record: unknown, timestamp?: number) => {
      emitted.push({ sub: owner(canonical), record: record as unknown[], timestamp });
      // Every other emit waits for room, as a full subpartition does.
      return emitted.length % 2 === 0 ? Promise.resolve() : undefined;
    },
  };
  return { partition: partition as unknown as ResultPartition, emitted };
}

const signal = { aborted: false } as TaskSignal;

describe('windowPartialsSender', () => {
  it('sends 1000 pairs in batches of at most 256, each to the subpartition owning all its keys, every pair once', async () => {
    const { partition, emitted } = keepingPartition();
    const send = windowPartialsSender(partition, () => undefined, signal);
    const keys = Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? i : `k${i}`));
    await send(
      keys.map((k) => canonicalKey(k)),
      keys,
      keys.map((_, i) => i * 10),
      4_999,
    );
    const got: [unknown, unknown][] = [];
    for (const { sub, record, timestamp } of emitted) {
      expect(timestamp).toBe(4_999);
      const [tag, ks, ps] = record as [number, unknown[], unknown[]];
      expect(tag).toBe(PARTIAL_BATCH);
      expect(ks.length).toBeGreaterThan(0);
      expect(ks.length).toBeLessThanOrEqual(256);
      for (const k of ks) expect(owner(canonicalKey(k))).toBe(sub);
      ks.forEach((k, i) => got.push([k, ps[i]]));
    }
    expect(new Set(emitted.map((e) => e.sub)).size).toBe(SUBPARTITIONS);
    expect(got.sort((a, b) => (a[1] as number) - (b[1] as number))).toEqual(keys.map((k, i) => [k, i * 10]));
    // Per subpartition, the pairs keep the order they were given in.
    for (let s = 0; s < SUBPARTITIONS; s++) {
      const order = emitted.filter((e) => e.sub === s).flatMap((e) => e.record[2] as number[]);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
  });

  it('refuses a pair the check refuses, before sending it', () => {
    const { partition, emitted } = keepingPartition();
    const send = windowPartialsSender(
      partition,
      ([, partial]) => {
        if (typeof partial === 'function') throw new RecordEncodingError('a function cannot be sent');
      },
      signal,
    );
    expect(() => send([canonicalKey('a')], ['a'], [() => 1], 9)).toThrow(RecordEncodingError);
    expect(emitted).toEqual([]);
  });
});
