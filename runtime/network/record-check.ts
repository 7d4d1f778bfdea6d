// What the record codec can carry between tasks. msgpackr throws on some values (symbols, cycles) but
// silently drops or reshapes others (a function becomes undefined, a Map a plain object, a class
// instance loses its prototype), so every record leaving a task is checked first and a bad one fails
// the task with a message that names what was found and where.
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

/** The hot path: the same rules as walk, without building paths; walk runs only to describe a failure. */
function fine(v: unknown, ancestors: object[], json: boolean): boolean {
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
  if (ancestors.length >= MAX_DEPTH || ancestors.includes(v)) return false;
  if (Array.isArray(v)) {
    ancestors.push(v);
    for (let i = 0; i < v.length; i++) if (!fine(v[i], ancestors, json)) return false;
    ancestors.pop();
    return true;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v instanceof Date || (v instanceof Uint8Array && !json);
  if (Object.getOwnPropertySymbols(v).length > 0) return false;
  ancestors.push(v);
  for (const k in v) if (!fine((v as Record<string, unknown>)[k], ancestors, json)) return false;
  ancestors.pop();
  return true;
}

/** What in `record` the codec cannot carry faithfully, or undefined when all of it can. */
export function findUnencodable(record: unknown, target: RecordTarget = 'network'): string | undefined {
  const t = typeof record;
  if (t === 'string' || t === 'boolean' || (t === 'number' && target === 'network')) return undefined;
  const json = target === 'json';
  // The common shape of records between tasks, a tuple of strings and numbers, without the walk's bookkeeping.
  if (!json && Array.isArray(record) && flatArray(record)) return undefined;
  return fine(record, [], json) ? undefined : walk(record, '', [], json);
}

function flatArray(a: readonly unknown[]): boolean {
  for (let i = 0; i < a.length; i++) {
    const t = typeof a[i];
    if (t !== 'string' && t !== 'number' && t !== 'boolean') return false;
  }
  return true;
}
