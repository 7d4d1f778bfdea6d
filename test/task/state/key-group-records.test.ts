// A key group's section read record by record without decoding state values (what an lmdb restore copies
// in): the end of any msgpack item found from its headers, entries with their values' bytes (a map
// state's pair by pair), removals and timers as decodeKeyGroup reads them, and a damaged section refused.
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { encodedKeyGroupRecords, itemEnd, pairUserKey, RestoredRecords } from '../../../runtime/task/state/key-group-records.js';
import { decodeKeyGroup, encodeKeyGroup, KeyGroupFormatError, type KeyGroupContents } from '../../../runtime/task/state/key-group-snapshot.js';
import { canonicalKey } from '../../../runtime/network/key-groups.js';

// The options of the checkpoint format's codec.
const packr = new Packr({ useRecords: false, moreTypes: false, useBigIntExtension: true, structuredClone: false, bundleStrings: false });

const VALUES: unknown[] = [
  null,
  true,
  false,
  0,
  127,
  128,
  255,
  256,
  65_535,
  65_536,
  2 ** 32,
  -1,
  -32,
  -33,
  -129,
  -40_000,
  -(2 ** 31) - 1,
  1.5,
  -0.25,
  Number.MAX_VALUE,
  '',
  'é'.repeat(15),
  'x'.repeat(31),
  'x'.repeat(32),
  'x'.repeat(255),
  'x'.repeat(256),
  'x'.repeat(70_000),
  new Uint8Array(0),
  new Uint8Array(300),
  new Uint8Array(70_000),
  [],
  Array.from({ length: 15 }, (_, i) => i),
  Array.from({ length: 16 }, (_, i) => `v${i}`),
  Array.from({ length: 70_000 }, (_, i) => i % 3),
  {},
  Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, i])),
  Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, [i, { deep: [i, `s${i}`] }]])),
  12n,
  -(2n ** 70n),
  new Date(1_700_000_000_123),
  [1, ['nested', [null, { a: [true, 2.5, new Uint8Array(3)] }]], 'end'],
];

describe('itemEnd', () => {
  it('finds where any msgpack item ends, alone or followed by another, without decoding it', () => {
    const tail = packr.pack('after');
    for (const value of VALUES) {
      const bytes = packr.pack(value);
      expect(itemEnd(bytes, 0), `${String(value).slice(0, 20)}`).toBe(bytes.length);
      const both = Buffer.concat([bytes, tail]);
      expect(itemEnd(both, 0)).toBe(bytes.length);
      expect(itemEnd(both, bytes.length)).toBe(both.length);
    }
  });

  it('refuses an item cut short or a type byte msgpack does not use', () => {
    const bytes = packr.pack({ a: 'x'.repeat(40), b: [1, 2, 3] });
    expect(() => itemEnd(bytes.subarray(0, bytes.length - 2), 0)).toThrow(KeyGroupFormatError);
    expect(() => itemEnd(Uint8Array.of(0xc1), 0)).toThrow(/unused type byte 0xc1/);
  });
});

describe('encodedKeyGroupRecords', () => {
  const contents: KeyGroupContents = {
    entries: [
      { stateName: 'count', kind: 'value', key: 'user-1', value: 41 },
      { stateName: 'names', kind: 'list', key: 7, value: ['a', 'b', { c: 3n }] },
      {
        stateName: 'seen',
        kind: 'map',
        key: ['composite', 1],
        value: [
          ['u1', { at: 1 }],
          [2, { at: 2 }],
        ],
      },
      ...Array.from({ length: 20 }, (_, i) => ({ stateName: 'count', kind: 'value' as const, key: `k${i}`, value: 'v'.repeat(i * 10) })),
    ],
    removed: [
      { stateName: 'count', kind: 'value', key: 'gone' },
      { stateName: 'seen', kind: 'map', key: 'user-2', userKey: 'u9' },
    ],
    timers: [{ service: 'user-timers', domain: 'event', key: 'user-1', namespace: null, timestamp: 1_000 }],
  };

  it('reads the records decodeKeyGroup reads, each value as the bytes that decode to it and a map state pair by pair', () => {
    const section = encodeKeyGroup(contents);
    const decoded = decodeKeyGroup(section);
    const records = [...encodedKeyGroupRecords(section)];
    const entries = records.filter((r) => r.type === 'entry');
    expect(entries).toHaveLength(decoded.entries.length);
    entries.forEach((r, i) => {
      const want = decoded.entries[i]!;
      expect({ stateName: r.stateName, kind: r.kind, key: r.key }).toEqual({ stateName: want.stateName, kind: want.kind, key: want.key });
      if (r.kind === 'map') {
        const pairs = r.value as readonly Uint8Array[];
        expect(pairs.map((p) => packr.unpack(p))).toEqual(want.value);
        // The pair's bytes are what the state holds for that user key: the value encoded alone.
        expect(pairs.map((p) => Buffer.from(p))).toEqual((want.value as unknown[]).map((p) => Buffer.from(packr.pack(p))));
        expect(pairs.map((p) => pairUserKey(p, canonicalKey))).toEqual(['u1', canonicalKey(2)]);
      } else {
        expect(packr.unpack(r.value as Uint8Array)).toEqual(want.value);
        expect(Buffer.from(r.value as Uint8Array)).toEqual(Buffer.from(packr.pack(want.value)));
      }
    });
    expect(records.filter((r) => r.type === 'removed').map(({ type: _, ...r }) => r)).toEqual(decoded.removed);
    expect(records.filter((r) => r.type === 'timer').map(({ type: _, ...r }) => r)).toEqual(decoded.timers);
    expect([...encodedKeyGroupRecords(new Uint8Array(0))]).toEqual([]);
  });

  it('reads every key as decodeKeyGroup does: integers of each width and sign, ASCII and other strings, and the rest', () => {
    const keys: unknown[] = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, -1, -32, -33, -128, -129, -32_768, -32_769];
    keys.push(-(2 ** 31), 2 ** 31 - 1, -(2 ** 31) - 1, 1.5, -(2 ** 40), 2 ** 53, '', 'a', 'x'.repeat(31), 'x'.repeat(32), 'ünï', '日本', 10n, [1, 'a'], {
      k: 1,
    });
    const states = ['one', 'two'];
    const section = encodeKeyGroup({
      entries: keys.map((key, i) => ({ stateName: states[i % 2]!, kind: i % 4 < 2 ? ('value' as const) : ('list' as const), key, value: i })),
      timers: [],
    });
    const records = [...encodedKeyGroupRecords(section)].filter((r) => r.type === 'entry');
    const decoded = decodeKeyGroup(section).entries;
    expect(records.map((r) => [r.stateName, r.kind])).toEqual(decoded.map((e) => [e.stateName, e.kind]));
    expect(records.map((r) => r.key)).toEqual(decoded.map((e) => e.key));
    expect(records.map((r) => r.key)).toEqual(keys);
  });

  it('refuses a section cut short or one that is not an array of records', () => {
    const section = encodeKeyGroup(contents);
    expect(() => [...encodedKeyGroupRecords(section.subarray(0, section.length - 5))]).toThrow(KeyGroupFormatError);
    expect(() => [...encodedKeyGroupRecords(packr.pack({ not: 'records' }))]).toThrow(/not a msgpack array/);
    expect(() => [...encodedKeyGroupRecords(packr.pack([[9, 'x']]))]).toThrow(/record of type 9/);
  });
});

describe('RestoredRecords', () => {
  it('knows a record met once written or removed, and past its capacity asks whether it was written', () => {
    const restored = new RestoredRecords(2);
    const written = new Set<string>();
    const met = (key: string): boolean => {
      const was = restored.met(key, () => written.has(key));
      if (!was) written.add(key);
      return was;
    };
    restored.removed('r');
    expect(met('r')).toBe(true);
    expect([met('a'), met('b'), met('c'), met('d')]).toEqual([false, false, false, false]);
    // 'a' and 'b' are known here; 'c' and 'd' only through the lookup.
    expect([met('a'), met('b'), met('c'), met('d'), met('e')]).toEqual([true, true, true, true, false]);
  });
});
