// fanOut, the link that passes a chain's records to its branches: without object reuse each branch but the
// last gets its own copy, made before any branch runs; with it every branch gets the same object.
import { describe, expect, it } from 'vitest';
import { fanOut, type ChainLink } from '../../runtime/task/chain-branches.js';

/** A branch that records what it gets (a snapshot, and the object itself), then changes it in place. */
function mutatingBranch(seen: unknown[], objects: unknown[]): ChainLink {
  return {
    processElement: (r) => {
      seen.push(structuredClone(r));
      objects.push(r);
      (r as { tag: string }).tag = 'changed';
    },
    processWatermark: () => undefined,
    endInput: () => undefined,
  };
}

describe('fanOut', () => {
  for (const n of [2, 3]) {
    it(`without object reuse, each of ${n} branches sees the record unchanged; the last gets the original`, () => {
      const seen: unknown[][] = Array.from({ length: n }, () => []);
      const objects: unknown[][] = Array.from({ length: n }, () => []);
      const link = fanOut(
        seen.map((s, i) => mutatingBranch(s, objects[i]!)),
        false,
      );
      const record = { id: 7, tag: 'orig', nested: { xs: [1, 2] } };
      void link.processElement(record, 5);
      for (const s of seen) expect(s).toEqual([{ id: 7, tag: 'orig', nested: { xs: [1, 2] } }]);
      for (let i = 0; i < n - 1; i++) expect(objects[i]![0]).not.toBe(record);
      expect(objects[n - 1]![0]).toBe(record);
    });

    it(`with object reuse, ${n} branches share one object and see each other's changes`, () => {
      const seen: unknown[][] = Array.from({ length: n }, () => []);
      const objects: unknown[][] = Array.from({ length: n }, () => []);
      const link = fanOut(
        seen.map((s, i) => mutatingBranch(s, objects[i]!)),
        true,
      );
      const record = { id: 7, tag: 'orig' };
      void link.processElement(record, 5);
      expect(seen[0]).toEqual([{ id: 7, tag: 'orig' }]);
      for (let i = 1; i < n; i++) expect(seen[i]).toEqual([{ id: 7, tag: 'changed' }]);
      for (const o of objects) expect(o[0]).toBe(record);
    });
  }

  it('a link that takes only watermarks gets no record and costs no copy', () => {
    const seen: unknown[] = [];
    const objects: unknown[] = [];
    const watermarks: number[] = [];
    const link = fanOut(
      [
        mutatingBranch(seen, objects),
        {
          ignoresRecords: true,
          processElement: () => expect.unreachable('a watermark-only link got a record'),
          processWatermark: (w) => void watermarks.push(w),
          endInput: () => undefined,
        },
      ],
      false,
    );
    const record = { id: 1 };
    void link.processElement(record, 0);
    void link.processWatermark(9);
    expect(objects[0]).toBe(record);
    expect(watermarks).toEqual([9]);
  });
});
