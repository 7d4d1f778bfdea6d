// The per-key table of keyed operators and combiners: every key found again after any number of
// inserts, nothing found that was not put in, insertion order kept.
import { describe, expect, it } from 'vitest';
import { KeyTable } from '../../runtime/task/key-table.js';

describe('KeyTable', () => {
  it('finds each of 20,000 keys at the index it was given, in insertion order, across growth', () => {
    const table = new KeyTable<number>();
    const keys = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? `word-${i}` : i % 3 === 1 ? `\u0001[${i},"x"]` : `ключ${i}`));
    for (const [i, key] of keys.entries()) {
      expect(table.indexOf(key)).toBe(-1);
      expect(table.insert(key, i * 10)).toBe(i);
    }
    expect(table.size).toBe(keys.length);
    expect(table.keys).toEqual(keys);
    for (const [i, key] of keys.entries()) {
      // A fresh copy of the key, as a task gets it (cut from a line, decoded from a buffer).
      const copy = [...key].join('');
      expect(table.indexOf(copy)).toBe(i);
      expect(table.values[i]).toBe(i * 10);
    }
    expect(table.indexOf('word-20001')).toBe(-1);
    expect(table.indexOf('word-')).toBe(-1);
  });

  it('tells apart keys that differ only in length, case or a trailing character, and the empty key', () => {
    const table = new KeyTable<string>();
    for (const key of ['a', 'aa', 'A', 'a\u0000', '', '\u0000', 'é', 'e\u0301']) table.insert(key, key);
    for (const key of ['a', 'aa', 'A', 'a\u0000', '', '\u0000', 'é', 'e\u0301']) expect(table.values[table.indexOf(key)]).toBe(key);
    expect(table.indexOf('aaa')).toBe(-1);
  });

  it('refuses a key it already holds, so a caller that skipped the lookup never makes two entries', () => {
    const table = new KeyTable<number>();
    table.insert('k', 1);
    expect(() => table.insert('k', 2)).toThrow('"k" is already in the table');
    expect(table.size).toBe(1);
    expect(table.values[table.indexOf('k')]).toBe(1);
  });
});
