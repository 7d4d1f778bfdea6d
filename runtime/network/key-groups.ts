// Key groups, as in Flink: a key's stable hash picks one of maxParallelism key groups, and each consumer
// subtask owns a contiguous range of them, so the same key reaches the same subtask from every producer,
// in every process, and a later rescale can move whole groups.
import { FloeError } from '../core/errors.js';

/** A key selector returned something that cannot be a key (a function, a Map, a class instance, …). */
export class InvalidKeyError extends FloeError {
  constructor(message: string) {
    super('INVALID_KEY', message, { retryable: false });
  }
}

const KEY_HINT = 'keys must be strings, numbers, booleans, bigints or null, or arrays / plain objects of them';

function describeType(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v !== 'object') return typeof v;
  const proto = Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null;
  return proto?.constructor?.name ? `a ${proto.constructor.name}` : 'an object';
}

function encodeNested(v: unknown, out: string[], depth: number): void {
  if (depth > 64) throw new InvalidKeyError(`the key is nested deeper than 64 levels (or contains a cycle); ${KEY_HINT}`);
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v));
      return;
    case 'number':
      // -0 and 0 are one key, as they are equal.
      out.push(v === 0 ? '0' : String(v));
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'bigint':
      out.push(`${v}n`);
      return;
    case 'object': {
      if (v === null) {
        out.push('null');
        return;
      }
      if (Array.isArray(v)) {
        out.push('[');
        for (let i = 0; i < v.length; i++) {
          if (i > 0) out.push(',');
          encodeNested(v[i], out, depth + 1);
        }
        out.push(']');
        return;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) {
        throw new InvalidKeyError(`the key contains ${describeType(v)}, which has no stable value; ${KEY_HINT}`);
      }
      // Field order does not matter: {a, b} and {b, a} are one key.
      const fields = Object.keys(v).sort();
      out.push('{');
      fields.forEach((f, i) => {
        if (i > 0) out.push(',');
        out.push(JSON.stringify(f), ':');
        encodeNested((v as Record<string, unknown>)[f], out, depth + 1);
      });
      out.push('}');
      return;
    }
    case 'undefined':
    case 'function':
    case 'symbol':
      throw new InvalidKeyError(`the key is or contains ${typeof v === 'undefined' ? 'undefined' : `a ${typeof v}`}; ${KEY_HINT}`);
    default:
      throw new InvalidKeyError(`the key is or contains a ${typeof v}; ${KEY_HINT}`);
  }
}

/**
 * The key's canonical form: equal keys (by value, whatever the field order) give the same string in
 * every process, different keys different strings. A string key is its own form (the hot path of
 * word-count-like jobs); every other form starts with \u0001, and a string that itself starts with
 * \u0000 or \u0001 is escaped with a leading \u0000, so the forms never collide.
 */
export function canonicalKey(key: unknown): string {
  if (typeof key === 'string') {
    const c = key.length > 0 ? key.charCodeAt(0) : 2;
    return c > 1 ? key : `\u0000${key}`;
  }
  // What encodeNested makes of a number, without its array: numbers are the other common key.
  if (typeof key === 'number') return key === 0 ? '\u00010' : `\u0001${key}`;
  const out: string[] = ['\u0001'];
  encodeNested(key, out, 0);
  return out.join('');
}

/** MurmurHash3's mix of one 32-bit block into the running hash `h`, without the rotation that follows. */
function mixBlock(h: number, block: number): number {
  let k = Math.imul(block, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  return h ^ Math.imul(k, 0x1b873593);
}

/** MurmurHash3's last steps over `n` code units (two bytes each): the length, then the avalanche. Unsigned. */
function finishHash(h: number, n: number): number {
  h ^= n * 2;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** MurmurHash3 (x86, 32 bit) over the string's UTF-16 code units, two per block. Unsigned. */
export function murmurHash(s: string, seed = 0x2f1a9e3b): number {
  let h = seed | 0;
  const n = s.length;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    h = mixBlock(h, s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16) | 0);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < n) h = mixBlock(h, s.charCodeAt(i));
  return finishHash(h, n);
}

/** The key group (0 … maxParallelism-1) of a key given in canonical form. */
export function keyGroupOf(canonical: string, maxParallelism: number): number {
  return murmurHash(canonical) % maxParallelism;
}

/** The UTF-16 code units of an integer key's canonical form, made without a string. */
const intCodes: number[] = [];

/**
 * The key group of `key` itself: keyGroupOf(canonicalKey(key)), and for a safe integer the same hash taken
 * over the code units of its canonical form (\u0001, a minus sign, the decimal digits) without making it.
 */
export function keyGroupOfKey(key: unknown, maxParallelism: number): number {
  if (typeof key !== 'number' || !Number.isSafeInteger(key)) return keyGroupOf(canonicalKey(key), maxParallelism);
  const codes = intCodes;
  let n = 0;
  codes[n++] = 1;
  let v = key;
  if (v < 0) {
    codes[n++] = 45;
    v = -v;
  }
  const first = n;
  do {
    codes[n++] = 48 + (v % 10);
    v = Math.floor(v / 10);
  } while (v > 0);
  for (let i = first, j = n - 1; i < j; i++, j--) {
    const c = codes[i]!;
    codes[i] = codes[j]!;
    codes[j] = c;
  }
  return murmurCodes(codes, n) % maxParallelism;
}

/** murmurHash over the first `n` of `codes` (UTF-16 code units). */
function murmurCodes(codes: readonly number[], n: number, seed = 0x2f1a9e3b): number {
  let h = seed | 0;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    h = mixBlock(h, codes[i]! | (codes[i + 1]! << 16) | 0);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < n) h = mixBlock(h, codes[i]!);
  return finishHash(h, n);
}

/** The consumer subtask that owns `keyGroup` (Flink's computeOperatorIndexForKeyGroup). */
export function subtaskForKeyGroup(keyGroup: number, parallelism: number, maxParallelism: number): number {
  return Math.floor((keyGroup * parallelism) / maxParallelism);
}

/** The key groups subtask `subtaskIndex` owns: [start, end], both included (Flink's KeyGroupRange). */
export function keyGroupRange(subtaskIndex: number, parallelism: number, maxParallelism: number): { readonly start: number; readonly end: number } {
  return {
    start: Math.ceil((subtaskIndex * maxParallelism) / parallelism),
    end: Math.ceil(((subtaskIndex + 1) * maxParallelism) / parallelism) - 1,
  };
}

/** The consumer subtask of a key: what a hash partition routes by. */
export function subtaskForKey(key: unknown, parallelism: number, maxParallelism: number): number {
  return subtaskForKeyGroup(keyGroupOfKey(key, maxParallelism), parallelism, maxParallelism);
}
