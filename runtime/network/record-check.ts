// What the record codec can carry between tasks. msgpackr throws on some values (symbols, cycles) but
// silently drops or reshapes others (a function becomes undefined, a Map a plain object, a class
// instance loses its prototype), so every record leaving a task is checked first and a bad one fails
// the task with a message that names what was found and where (symbol-keyed properties: sampled, see
// networkRecordChecker).
import { FloeError } from '../core/errors.js';

/** A record the codec cannot carry faithfully. */
export class RecordEncodingError extends FloeError {
  constructor(message: string) {
    super('RECORD_ENCODING', message, { retryable: false });
  }
}

export const CODEC_HINT =
  'records sent between tasks may hold strings, numbers, booleans, null, undefined, bigints, Dates, Uint8Arrays, and arrays / plain objects of them';

const MAX_DEPTH = 256;

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (typeof v !== 'object') return typeof v;
  const proto = Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null;
  const name = proto?.constructor?.name;
  return name ? `a ${name}` : 'an object';
}

const ADVICE: Record<string, string> = {
  'a Map': ' (it would arrive as a plain object; send [...map.entries()] instead)',
  'a Set': ' (it would arrive as an array; send [...set] instead)',
  'a function': ' (it would arrive as undefined)',
};

const at = (path: string): string => (path === '' ? 'the record itself' : `record${path}`);

/** 'network': the msgpackr record codec. 'json': results that travel as JSON (the collect sink's). */
export type RecordTarget = 'network' | 'json';

function walk(v: unknown, path: string, ancestors: object[], json: boolean): string | undefined {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return undefined;
    case 'number':
      return json && !Number.isFinite(v) ? `${v} at ${at(path)} (JSON would turn it into null)` : undefined;
    case 'bigint':
      return json ? `a bigint at ${at(path)} (JSON cannot hold it; convert it with String())` : undefined;
    case 'object':
      break;
    default:
      return `${typeName(v)} at ${at(path)}${ADVICE[typeName(v)] ?? ''}`;
  }
  if (v === null) return undefined;
  if (ancestors.includes(v)) return `a cycle: ${at(path)} refers back to one of its own containers`;
  if (ancestors.length >= MAX_DEPTH) return `nesting deeper than ${MAX_DEPTH} levels at ${at(path)}`;
  if (Array.isArray(v)) {
    ancestors.push(v);
    for (let i = 0; i < v.length; i++) {
      const bad = walk(v[i], `${path}[${i}]`, ancestors, json);
      if (bad !== undefined) return bad;
    }
    ancestors.pop();
    return undefined;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) {
    if (v instanceof Date) return undefined;
    if (v instanceof Uint8Array && !json) return undefined;
    const t = typeName(v);
    return `${t} at ${at(path)}${ADVICE[t] ?? ' (only plain objects keep their shape: it would arrive without its class)'}`;
  }
  if (Object.getOwnPropertySymbols(v).length > 0) return `a symbol-keyed property on ${at(path)} (it would be dropped)`;
  ancestors.push(v);
  for (const k in v) {
    const bad = walk((v as Record<string, unknown>)[k], `${path}.${k}`, ancestors, json);
    if (bad !== undefined) return bad;
  }
  ancestors.pop();
  return undefined;
}

/**
 * The hot path: the same rules as walk, without building paths; walk runs only to describe a failure. A
 * cycle is found as nesting beyond MAX_DEPTH (walk then names it a cycle), so no list of ancestors is kept.
 * `symbols`: whether to look for symbol-keyed properties (a call per object, the check's largest cost).
 */
function fine(v: unknown, depth: number, json: boolean, symbols: boolean): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return true;
    case 'number':
      return !json || Number.isFinite(v);
    case 'bigint':
      return !json;
    case 'object':
      break;
    default:
      return false;
  }
  if (v === null) return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!fine(v[i], depth + 1, json, symbols)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v instanceof Date || (v instanceof Uint8Array && !json);
  if (symbols && Object.getOwnPropertySymbols(v).length > 0) return false;
  for (const k in v) if (!fine((v as Record<string, unknown>)[k], depth + 1, json, symbols)) return false;
  return true;
}

function check(record: unknown, json: boolean, symbols: boolean): string | undefined {
  const t = typeof record;
  if (t === 'string' || t === 'boolean' || (t === 'number' && !json)) return undefined;
  // The common shape of records between tasks, a tuple of strings and numbers, without the walk's bookkeeping.
  if (!json && Array.isArray(record) && flatArray(record)) return undefined;
  return fine(record, 0, json, symbols) ? undefined : walk(record, '', [], json);
}

/** What in `record` the codec cannot carry faithfully, or undefined when all of it can. */
export function findUnencodable(record: unknown, target: RecordTarget = 'network'): string | undefined {
  return check(record, target === 'json', true);
}

/** Records of an output checked for symbol-keyed properties before the check samples them. */
export const SYMBOL_CHECK_FIRST = 1024;
/** After the first SYMBOL_CHECK_FIRST, one record in this many is checked for symbol-keyed properties. */
export const SYMBOL_CHECK_EVERY = 64;

/**
 * findUnencodable for the records of one output, as they pass: every record is checked in full for what
 * the codec cannot carry (functions, symbols, class instances, Maps and Sets, cycles, too deep nesting),
 * except symbol-keyed properties, which the first SYMBOL_CHECK_FIRST records are checked for and then one
 * in SYMBOL_CHECK_EVERY: looking for them costs as much as the rest of the check, and a record's shape
 * comes from the code that makes it, so records of one output have them from the start or not at all.
 */
export function networkRecordChecker(): (record: unknown) => string | undefined {
  let n = 0;
  return (record) => {
    const symbols = n < SYMBOL_CHECK_FIRST || n % SYMBOL_CHECK_EVERY === 0;
    n++;
    return check(record, false, symbols);
  };
}

function flatArray(a: readonly unknown[]): boolean {
  for (let i = 0; i < a.length; i++) {
    const t = typeof a[i];
    if (t !== 'string' && t !== 'number' && t !== 'boolean') return false;
  }
  return true;
}
