// The JobMaster's split assignment: splits cut from the listed files one at a time, when asked.
import { describe, expect, it } from 'vitest';
import { SplitAssigner } from '../../runtime/jobmaster/input-splits.js';

const drain = (a: SplitAssigner): unknown[] => {
  const out: unknown[] = [];
  for (let s = a.nextSplit(); s !== null; s = a.nextSplit()) out.push(s);
  return out;
};

describe('SplitAssigner', () => {
  it('cuts each file into ranges in order, a gzip file whole, an empty file not at all, and after reset hands out the same splits again', () => {
    const assigner = new SplitAssigner(
      [
        { path: 's3://b/in/a.txt', size: 10 },
        { path: 's3://b/in/b.txt.gz', size: 25 },
        { path: 's3://b/in/empty.txt', size: 0 },
        { path: 's3://b/in/c.txt', size: 4 },
      ],
      4,
    );
    const splits = drain(assigner);
    expect(splits).toEqual([
      { splitId: 's3://b/in/a.txt@0', splitNumber: 0, path: 's3://b/in/a.txt', start: 0, length: 4 },
      { splitId: 's3://b/in/a.txt@4', splitNumber: 1, path: 's3://b/in/a.txt', start: 4, length: 4 },
      { splitId: 's3://b/in/a.txt@8', splitNumber: 2, path: 's3://b/in/a.txt', start: 8, length: 2 },
      { splitId: 's3://b/in/b.txt.gz@0', splitNumber: 3, path: 's3://b/in/b.txt.gz', start: 0, length: 25, compression: 'gzip' },
      { splitId: 's3://b/in/c.txt@0', splitNumber: 4, path: 's3://b/in/c.txt', start: 0, length: 4 },
    ]);
    expect(assigner.nextSplit()).toBeNull();
    assigner.reset();
    expect(drain(assigner)).toEqual(splits);
  });

  it('cuts a split only when asked: a petabyte object in 1-byte splits costs nothing up front', () => {
    const assigner = new SplitAssigner([{ path: 's3://b/huge.txt', size: 2 ** 50 }], 1);
    expect(assigner.nextSplit()).toEqual({ splitId: 's3://b/huge.txt@0', splitNumber: 0, path: 's3://b/huge.txt', start: 0, length: 1 });
    expect(assigner.nextSplit()).toEqual({ splitId: 's3://b/huge.txt@1', splitNumber: 1, path: 's3://b/huge.txt', start: 1, length: 1 });
  });

  it('hands out splits given back (a reader that failed) before new ones', () => {
    const assigner = new SplitAssigner([{ path: '/in/a.txt', size: 3 }], 1);
    const first = assigner.nextSplit()!;
    const second = assigner.nextSplit()!;
    assigner.addSplitsBack([first]);
    expect(assigner.nextSplit()).toEqual(first);
    expect(assigner.nextSplit()).toEqual({ ...second, splitId: '/in/a.txt@2', splitNumber: 2, start: 2 });
    expect(assigner.nextSplit()).toBeNull();
  });
});
