// The slicing window operator's slices of one key group in a checkpoint (GroupSlices), column by column:
// the group's keys, how many slices each has, the slices' starts (key after key, ascending per key) and
// their accumulators. A column of numbers is packed in the narrowest typed array that holds it exactly
// (Uint8, Uint16, Int32 or Float64); accumulators that are not all numbers are stateCodec's bytes of the
// list. Typed arrays are in the platform's byte order (little-endian on x64 and arm64, where Floe runs).
import { KeyGroupFormatError } from './state/key-group-snapshot.js';
import { stateCodec } from './state/incremental-key-groups.js';

/** A column of numbers: its element type and its bytes. */
type Column = ['u8' | 'u16' | 'i32' | 'f64', Uint8Array];

/**
 * [format, keys, counts, base, unit, starts, accumulators]: slice i starts at base + starts[i] * unit
 * (base 0 and unit 1 when the starts are not whole units from the earliest).
 */
type GroupSlices = [
  format: typeof GROUP_SLICES,
  keys: unknown[],
  counts: Column,
  base: number,
  unit: number,
  starts: Column,
  accs: Column | ['packed', Uint8Array],
];

/** The format tag of GroupSlices. */
export const GROUP_SLICES = 'slices/1';

/** One key's slices as the operator holds them: starts ascending, one accumulator each. */
export interface SlicesOfKey {
  readonly key: unknown;
  readonly starts: readonly number[];
  readonly accs: readonly unknown[];
}

const bytesOf = (a: ArrayBufferView): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** `values` (numbers) in the narrowest column that gives each back exactly. */
function columnOf(values: ArrayLike<number>): Column {
  let min = 0;
  let max = 0;
  let integers = true;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if ((v | 0) !== v || Object.is(v, -0)) {
      integers = false;
      break;
    }
    if (v < min) min = v;
    else if (v > max) max = v;
  }
  if (!integers) return ['f64', bytesOf(Float64Array.from(values))];
  if (min >= 0 && max <= 0xff) return ['u8', Uint8Array.from(values)];
  if (min >= 0 && max <= 0xffff) return ['u16', bytesOf(Uint16Array.from(values))];
  return ['i32', bytesOf(Int32Array.from(values))];
}

const TYPES = { u8: Uint8Array, u16: Uint16Array, i32: Int32Array, f64: Float64Array } as const;

/** A column's numbers (a copy when its bytes do not sit at a multiple of its element size). */
function numbersOf(column: unknown): ArrayLike<number> {
  const [kind, bytes] = Array.isArray(column) ? (column as [unknown, unknown]) : [undefined, undefined];
  const Type = typeof kind === 'string' ? TYPES[kind as keyof typeof TYPES] : undefined;
  if (Type === undefined || !(bytes instanceof Uint8Array)) {
    throw new KeyGroupFormatError(`a column of the window slices is ${String(kind)}, expected one of ${Object.keys(TYPES).join(', ')} with its bytes`);
  }
  const size = Type.BYTES_PER_ELEMENT;
  if (bytes.length % size !== 0) throw new KeyGroupFormatError(`a ${String(kind)} column of the window slices holds ${bytes.length} bytes`);
  const aligned = bytes.byteOffset % size === 0 ? bytes : Uint8Array.from(bytes);
  return new Type(aligned.buffer as ArrayBuffer, aligned.byteOffset, aligned.length / size);
}

/** The slices of `list` (keys of one group), `unit` the slice size: copies taken now, nothing shared with the operator. */
export function packGroupSlices(list: readonly SlicesOfKey[], unit: number): GroupSlices {
  const keys: unknown[] = new Array(list.length);
  const counts = new Uint32Array(list.length);
  let total = 0;
  let base = Infinity;
  let numbers = true;
  for (let k = 0; k < list.length; k++) {
    const { key, starts, accs } = list[k]!;
    keys[k] = key;
    counts[k] = starts.length;
    total += starts.length;
    if (starts.length > 0 && starts[0]! < base) base = starts[0]!;
    if (numbers) for (const acc of accs) if (typeof acc !== 'number') numbers = false;
  }
  const starts = new Float64Array(total);
  const accs: number[] | unknown[] = new Array(total);
  let inUnits = Number.isFinite(base);
  let at = 0;
  for (const entry of list) {
    for (let i = 0; i < entry.starts.length; i++, at++) {
      const s = entry.starts[i]!;
      const n = (s - base) / unit;
      if (inUnits && !(Number.isInteger(n) && n <= 0x7fffffff)) inUnits = false;
      starts[at] = inUnits ? n : s;
      accs[at] = entry.accs[i];
    }
  }
  if (!inUnits) {
    // Some start is not a whole number of units from the earliest: every start as itself.
    at = 0;
    for (const entry of list) for (const s of entry.starts) starts[at++] = s;
  }
  const accColumn: GroupSlices[6] = numbers ? columnOf(accs as number[]) : ['packed', stateCodec.pack(accs)];
  return [GROUP_SLICES, keys, columnOf(counts), inUnits ? base : 0, inUnits ? unit : 1, columnOf(starts), accColumn];
}

/** GroupSlices back: the keys, their slice counts, each slice's start, and the accumulators. */
export function unpackGroupSlices(namespace: unknown): {
  keys: readonly unknown[];
  counts: ArrayLike<number>;
  starts: (i: number) => number;
  accs: ArrayLike<unknown>;
} {
  const ns = namespace as GroupSlices;
  if (!Array.isArray(ns) || ns[0] !== GROUP_SLICES || ns.length !== 7 || !Array.isArray(ns[1])) {
    throw new KeyGroupFormatError(
      `the window slices' record holds ${Array.isArray(ns) ? `[${String(ns[0])}, …] (${ns.length} fields)` : typeof ns}, expected [${GROUP_SLICES}, …] (7 fields)`,
    );
  }
  const [, keys, countColumn, base, unit, startColumn, accColumn] = ns;
  const counts = numbersOf(countColumn);
  const units = numbersOf(startColumn);
  const accs = accColumn[0] === 'packed' ? (stateCodec.unpack(accColumn[1]) as unknown[]) : numbersOf(accColumn);
  let total = 0;
  for (let k = 0; k < counts.length; k++) total += counts[k]!;
  if (keys.length !== counts.length || units.length !== total || (accColumn[0] === 'packed' && !Array.isArray(accs)) || accs.length !== total) {
    throw new KeyGroupFormatError(
      `the window slices hold ${keys.length} keys, ${counts.length} counts, ${units.length} starts and ${accs.length} accumulators of ${total} slices`,
    );
  }
  return { keys, counts, starts: (i) => base + units[i]! * unit, accs };
}
