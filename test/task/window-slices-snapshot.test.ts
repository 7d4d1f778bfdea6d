// A key group's window slices in a checkpoint come back as they were: keys, starts and accumulators of
// every kind (small counts, large and negative integers, fractions, -0 and NaN, objects), starts far
// apart, through the key-group file's msgpack; a record of another shape fails with KeyGroupFormatError.
import { describe, expect, it } from 'vitest';
import { decodeKeyGroup, encodeKeyGroup, KeyGroupFormatError } from '../../runtime/task/state/key-group-snapshot.js';
import { packGroupSlices, unpackGroupSlices, type SlicesOfKey } from '../../runtime/task/window-slices-snapshot.js';

/** `list` packed, through a key group's bytes, and unpacked: per key its starts and accumulators. */
function roundTrip(list: SlicesOfKey[], unit: number): { key: unknown; starts: number[]; accs: unknown[] }[] {
  const namespace = packGroupSlices(list, unit);
  const bytes = encodeKeyGroup({ entries: [], timers: [{ service: 'window-slices', domain: 'event', key: list[0]!.key, namespace, timestamp: 5 }] });
  const { keys, counts, starts, accs } = unpackGroupSlices(decodeKeyGroup(bytes).timers[0]!.namespace);
  const out: { key: unknown; starts: number[]; accs: unknown[] }[] = [];
  let at = 0;
  for (let k = 0; k < keys.length; k++) {
    const e = { key: keys[k], starts: [] as number[], accs: [] as unknown[] };
    for (let i = 0; i < counts[k]!; i++, at++) {
      e.starts.push(starts(at));
      e.accs.push(accs[at]);
    }
    out.push(e);
  }
  return out;
}

const plain = (list: SlicesOfKey[]) => list.map((e) => ({ key: e.key, starts: [...e.starts], accs: [...e.accs] }));

describe('window slices of a key group in a checkpoint', () => {
  const cases: [string, SlicesOfKey[], number][] = [
    [
      'small counts',
      [
        { key: 3, starts: [1000, 2000, 3000], accs: [1, 255, 0] },
        { key: 'a', starts: [2000], accs: [7] },
      ],
      1000,
    ],
    [
      'counts past 255 and 65535',
      [
        { key: 3, starts: [0, 10], accs: [256, 70_000] },
        { key: 4, starts: [10], accs: [65_535] },
      ],
      10,
    ],
    [
      'negative integers and fractions',
      [
        { key: 3, starts: [-50, 0], accs: [-3, 0.25] },
        { key: 9n, starts: [50], accs: [2 ** 40] },
      ],
      50,
    ],
    [
      '-0 and NaN',
      [
        { key: [1, 'x'], starts: [5], accs: [-0] },
        { key: 2, starts: [5, 10], accs: [NaN, Infinity] },
      ],
      5,
    ],
    [
      'objects',
      [
        { key: 'k', starts: [0, 3], accs: [{ n: 1, s: 'x' }, [1, 2]] },
        { key: 'l', starts: [3], accs: [7] },
      ],
      3,
    ],
    ['starts more than 2^31 units apart', [{ key: 1, starts: [-(2 ** 40), 0, 2 ** 45], accs: [1, 2, 3] }], 1],
    [
      'starts not whole units apart',
      [
        { key: 1, starts: [0, 7], accs: [1, 2] },
        { key: 2, starts: [3], accs: [4] },
      ],
      5,
    ],
  ];
  for (const [name, list, unit] of cases) {
    it(`${name}: come back as they were`, () => {
      expect(roundTrip(list, unit)).toEqual(plain(list));
    });
  }

  it('an accumulator changed after the snapshot is not in it', () => {
    const acc = { n: 1 };
    const list = [{ key: 1, starts: [0], accs: [acc] }];
    const namespace = packGroupSlices(list, 1);
    acc.n = 2;
    expect(unpackGroupSlices(namespace).accs[0]).toEqual({ n: 1 });
  });

  it('a record of another shape fails with KeyGroupFormatError', () => {
    expect(() => unpackGroupSlices([0, new Uint8Array(1)])).toThrow(KeyGroupFormatError);
    const good = packGroupSlices([{ key: 1, starts: [0, 1], accs: [1, 2] }], 1);
    expect(() => unpackGroupSlices([...good.slice(0, 6), ['u64', new Uint8Array(8)]])).toThrow(/expected one of u8, u16, i32, f64/);
    expect(() => unpackGroupSlices([...good.slice(0, 6), ['u8', new Uint8Array(3)]])).toThrow(/1 keys, 1 counts, 2 starts and 3 accumulators of 2 slices/);
  });
});
