// Compile-time checks of the job API, run by `npm test`'s `tsc --noEmit` (this file is no vitest suite):
// each `@ts-expect-error` line must fail to type-check, so the check fails if a wrong field name or an
// unencodable key ever compiles again. The lines without it must compile.
import type { StreamEnvironment } from 'floe';

interface Place {
  city: string;
  zip: number;
}
interface Reading {
  msg: string;
  temp: number;
  total: bigint;
  place: Place;
  note?: number;
}

export function fieldNames(env: StreamEnvironment): void {
  const readings = env.fromCollection<Reading>([]);
  const byMsg = readings.keyBy((r) => r.msg);
  byMsg.sum('temp');
  byMsg.min('temp');
  byMsg.max('msg');
  byMsg.minBy('total');
  byMsg.maxBy('temp');
  // @ts-expect-error a misspelt field
  byMsg.sum('msx');
  // @ts-expect-error sum adds numbers: 'msg' holds strings
  byMsg.sum('msg');
  // @ts-expect-error an optional field may be missing from a record
  byMsg.sum('note');
  // @ts-expect-error min compares numbers, bigints and strings, not objects
  byMsg.min('place');
  // @ts-expect-error a misspelt field
  byMsg.maxBy('tmp');
  // @ts-expect-error minBy needs the field whose value picks the record
  byMsg.minBy();
  // @ts-expect-error objects are read by property name, not by index
  byMsg.max(0);

  const pairs = env.fromCollection<[string, number]>([]).keyBy((t) => t[0]);
  pairs.sum(1);
  pairs.min(1);
  pairs.maxBy(0);
  // @ts-expect-error index 0 holds strings
  pairs.sum(0);
  // @ts-expect-error the tuple has no index 2
  pairs.minBy(2);
  // @ts-expect-error tuples are read by index
  pairs.sum('1');

  // An array's type does not say what each index holds: any index of one that may hold numbers is a field.
  const rows = env
    .fromCollection([
      ['a', 1],
      ['b', 2],
    ])
    .keyBy((row) => row[0]!);
  rows.sum(1);
  rows.maxBy(0);
  const strings = env.fromCollection([['a', 'b']]).keyBy((row) => row.length);
  // @ts-expect-error no index of an array of strings holds numbers
  strings.sum(1);

  const numbers = env.fromSequence(1, 10).keyBy((n) => n % 2);
  numbers.sum();
  numbers.min();
  numbers.max();
  // @ts-expect-error without a field, min compares the records themselves, which must be numbers
  pairs.min();
}

export function keyTypes(env: StreamEnvironment): void {
  const readings = env.fromCollection<Reading>([]);
  readings.keyBy((r) => r.msg);
  readings.keyBy((r) => r.total);
  readings.keyBy((r) => r.temp > 0);
  readings.keyBy(() => null);
  readings.keyBy((r) => [r.msg, r.temp]);
  readings.keyBy((r) => r.place);
  readings.keyBy((r) => ({ city: r.place.city, zip: r.place.zip }));
  // @ts-expect-error a Map has no value the key can be routed by
  readings.keyBy(() => new Map<string, number>());
  // @ts-expect-error nor has a Set
  readings.keyBy((r) => new Set([r.msg]));
  // @ts-expect-error nor a Date
  readings.keyBy(() => ({ day: new Date() }));
  // @ts-expect-error a key cannot be undefined, which an optional field may be
  readings.keyBy((r) => r.note);
  // @ts-expect-error nor a function
  readings.keyBy((r) => () => r.msg);
  // @ts-expect-error nor a symbol
  readings.keyBy(() => Symbol('k'));
}
