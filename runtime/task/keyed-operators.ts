// Keyed operators: per-key state in the task, in a Map keyed by the key's canonical form. A bounded job
// emits one final value per key at end of input; an unbounded one emits the key's new value per record.
import { FloeError } from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import type { TaskSignal } from '../core/cancellation.js';
import type { ExtremumKind, OperatorSpec } from '../jobgraph/jobgraph.js';
import { canonicalKey, InvalidKeyError } from '../network/key-groups.js';
import { KeyTable } from './key-table.js';

type Emit = (record: unknown) => Promise<void> | void;
export type KeyedOperatorSpec = Extract<OperatorSpec, { kind: 'keyed.reduce' | 'keyed.sum' | 'keyed.aggregate' | ExtremumKind }>;

/** A record does not fit what a keyed operator does with it (sum of a non-number, …). */
export class RecordTypeError extends FloeError {
  constructor(message: string) {
    super('RECORD_TYPE', message, { retryable: false });
  }
}

export interface KeyedStep {
  readonly emit: Emit;
  /** End of input: emits the final value of every key (for emit 'final'; nothing for 'updates'). */
  finish(): Promise<void>;
  /** Keys held. */
  readonly size: number;
}

/** Functions the keyed operator calls, already resolved from the job's library. */
export interface KeyedFunctions {
  readonly key: Function;
  readonly fn?: Function;
  readonly selector?: Function;
  readonly createAccumulator?: Function;
  readonly add?: Function;
  readonly getResult?: Function;
  readonly merge?: Function;
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : typeof v;
}

const shortKey = (key: unknown): string => {
  let s: string;
  try {
    s = typeof key === 'bigint' ? `${key}n` : (JSON.stringify(key) ?? String(key));
  } catch {
    s = String(key);
  }
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/**
 * How one kind of keyed operator folds a record into a key's state and what it emits for that state;
 * and, for pre-aggregation, what a producer sends for a state (`partial`, plain data the network
 * carries) and how the keyed operator starts a state from a partial or merges one into it.
 */
interface Fold<S> {
  first(record: unknown, key: unknown): S;
  next(state: S, record: unknown, key: unknown): S;
  result(state: S): unknown;
  partial(state: S): unknown;
  fromPartial(partial: unknown, key: unknown): S;
  merge(state: S, partial: unknown, key: unknown): S;
}

function foldOf(op: KeyedOperatorSpec, f: KeyedFunctions): Fold<unknown> {
  const label = `${op.kind.slice('keyed.'.length)} '${op.name}'`;
  const sync = (what: string, v: unknown): unknown => {
    if (isThenable(v)) throw new RecordTypeError(`${what} of ${label} returned a promise; keyed functions must return their value synchronously`);
    return v;
  };
  const number = (v: unknown, key: unknown, where: string): number => {
    if (typeof v !== 'number') throw new RecordTypeError(`${label} adds numbers, but ${where} for key ${shortKey(key)} is ${typeOf(v)}`);
    return v;
  };
  switch (op.kind) {
    case 'keyed.reduce': {
      const reduce = f.fn!;
      const next = (acc: unknown, r: unknown): unknown => sync('the reduce function', reduce(acc, r));
      return { first: (r) => r, next, result: (acc) => acc, partial: (acc) => acc, fromPartial: (p) => p, merge: next };
    }
    case 'keyed.aggregate': {
      const { createAccumulator, add, getResult, merge } = f;
      return {
        first: (r) => sync('add', add!(r, sync('createAccumulator', createAccumulator!()))),
        next: (acc, r) => sync('add', add!(r, acc)),
        result: (acc) => sync('getResult', getResult!(acc)),
        partial: (acc) => acc,
        fromPartial: (p) => p,
        merge: (acc, p) => {
          if (merge === undefined) throw new RecordTypeError(`${label} got pre-aggregated input but has no merge function`);
          return sync('merge', merge(acc, p));
        },
      };
    }
    case 'keyed.sum': {
      if (op.selector !== undefined) {
        const selector = f.selector!;
        const value = (r: unknown, key: unknown): number => number(sync('the selector', selector(r)), key, 'what the selector returned for a record');
        return {
          first: (r, key) => ({ key, sum: value(r, key) }),
          next: (s: { key: unknown; sum: number }, r, key) => {
            s.sum += value(r, key);
            return s;
          },
          result: (s: { key: unknown; sum: number }) => [s.key, s.sum],
          partial: (s: { key: unknown; sum: number }) => s.sum,
          fromPartial: (p, key) => ({ key, sum: p as number }),
          merge: (s: { key: unknown; sum: number }, p) => {
            s.sum += p as number;
            return s;
          },
        };
      }
      const field = op.field;
      if (field === undefined) {
        return {
          first: (r, key) => number(r, key, 'a record'),
          next: (s: number, r, key) => s + number(r, key, 'a record'),
          result: (s) => s,
          partial: (s) => s,
          fromPartial: (p) => p as number,
          merge: (s: number, p) => s + (p as number),
        };
      }
      const invalid = (r: unknown, key: unknown): number => {
        if (r === null || typeof r !== 'object')
          throw new RecordTypeError(`${label} sums field ${JSON.stringify(field)}, but a record for key ${shortKey(key)} is ${typeOf(r)}`);
        return number((r as Record<string | number, unknown>)[field], key, `field ${JSON.stringify(field)} of a record`);
      };
      // Small enough to be inlined where it is called once per record.
      const value = (r: unknown, key: unknown): number => {
        const v = r !== null && typeof r === 'object' ? (r as Record<string | number, unknown>)[field] : undefined;
        return typeof v === 'number' ? v : invalid(r, key);
      };
      // As in Flink: the key's first record, with the field holding the sum.
      return {
        first: (r, key) => ({ first: r, sum: value(r, key) }),
        next: (s: { first: unknown; sum: number }, r, key) => {
          s.sum += value(r, key);
          return s;
        },
        result: (s: { first: object; sum: number }) => {
          if (Array.isArray(s.first)) {
            const copy = [...s.first];
            copy[field as number] = s.sum;
            return copy;
          }
          return { ...s.first, [field]: s.sum };
        },
        // The partial keeps the producer's first record of the key; the merged state the first to arrive.
        partial: (s: { first: unknown; sum: number }) => [s.first, s.sum],
        fromPartial: (p) => ({ first: (p as [unknown, number])[0], sum: (p as [unknown, number])[1] }),
        merge: (s: { first: unknown; sum: number }, p) => {
          s.sum += (p as [unknown, number])[1];
          return s;
        },
      };
    }
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
      return extremumFold(op, label);
    default:
      return op satisfies never;
  }
}

/** A key's extreme so far: the value, and the record it is reported with. */
interface Extreme {
  record: unknown;
  value: number | bigint | string;
}

/**
 * min / max / minBy / maxBy, as Flink's: min and max keep the key's first record and put the extreme
 * value of the field into it; minBy and maxBy keep the record holding the extreme, the first on a tie.
 * NaN counts as larger than every number (as Java's Double.compareTo), so the answer does not depend
 * on the order records arrive in.
 */
function extremumFold(op: Extract<KeyedOperatorSpec, { kind: ExtremumKind }>, label: string): Fold<Extreme> {
  const field = op.field;
  const wantsMin = op.kind === 'keyed.min' || op.kind === 'keyed.minBy';
  const byRecord = op.kind === 'keyed.minBy' || op.kind === 'keyed.maxBy';
  const where = field === undefined ? 'a record' : `field ${JSON.stringify(field)} of a record`;
  const valueOf = (r: unknown, key: unknown): number | bigint | string => {
    let v = r;
    if (field !== undefined) {
      if (r === null || typeof r !== 'object')
        throw new RecordTypeError(`${label} compares field ${JSON.stringify(field)}, but a record for key ${shortKey(key)} is ${typeOf(r)}`);
      v = (r as Record<string | number, unknown>)[field];
    }
    if (typeof v !== 'number' && typeof v !== 'bigint' && typeof v !== 'string') {
      throw new RecordTypeError(`${label} compares numbers, bigints or strings, but ${where} for key ${shortKey(key)} is ${typeOf(v)}`);
    }
    return v;
  };
  // Whether `a` comes strictly before `b` (of the same type) in ascending order.
  const before = (a: number | bigint | string, b: number | bigint | string): boolean => {
    if (typeof a === 'number' && (Number.isNaN(a) || Number.isNaN(b))) return !Number.isNaN(a);
    return a < b;
  };
  const better = (candidate: number | bigint | string, held: number | bigint | string, key: unknown): boolean => {
    if (typeof candidate !== typeof held) {
      throw new RecordTypeError(
        `${label} compares the values of one key, but ${where} for key ${shortKey(key)} is ${typeOf(candidate)} where an earlier one was ${typeOf(held)}; give every record of a key the same type there`,
      );
    }
    return wantsMin ? before(candidate, held) : before(held, candidate);
  };
  const fold = (s: Extreme, record: unknown, value: number | bigint | string, key: unknown): Extreme => {
    if (better(value, s.value, key)) {
      s.value = value;
      if (byRecord) s.record = record;
    }
    return s;
  };
  return {
    first: (r, key) => ({ record: r, value: valueOf(r, key) }),
    next: (s, r, key) => fold(s, r, valueOf(r, key), key),
    result: (s) => {
      if (byRecord) return s.record;
      if (field === undefined) return s.value;
      if (Array.isArray(s.record)) {
        const copy = [...s.record];
        copy[field as number] = s.value;
        return copy;
      }
      return { ...(s.record as object), [field]: s.value };
    },
    // A producer's partial is its state as plain data; merged, the state that arrived first keeps its record on a tie.
    partial: (s) => [s.record, s.value],
    fromPartial: (p) => ({ record: (p as [unknown, number])[0], value: (p as [unknown, number])[1] }),
    merge: (s, p, key) => fold(s, (p as [unknown, number])[0], (p as [unknown, number])[1], key),
  };
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export function keyedStep(op: KeyedOperatorSpec, f: KeyedFunctions, next: Emit, signal?: TaskSignal): KeyedStep {
  const fold = foldOf(op, f);
  // A key's state, by the key's canonical form (a record of a known key costs one lookup).
  let state = new KeyTable<unknown>();
  const keyFn = f.key;
  const invalid = (key: unknown): string => {
    try {
      return canonicalKey(key);
    } catch (e) {
      if (e instanceof InvalidKeyError) throw new InvalidKeyError(`the key selector of ${op.kind} '${op.name}' returned an unusable key: ${e.message}`);
      throw e;
    }
  };
  // A plain string key is its own canonical form (see canonicalKey): no call on the hot path.
  const canonical = (key: unknown): string => (typeof key === 'string' && key.length > 0 && key.charCodeAt(0) > 1 ? key : invalid(key));
  const updates = op.emit === 'updates';
  // Pre-aggregated input is [key, partial] pairs: the key travels with its partial, because a
  // partial is not a record and the key selector must never be applied to it.
  const emit: Emit =
    op.preAggregate === true && !updates
      ? (pair) => {
          const key = (pair as [unknown, unknown])[0];
          const partial = (pair as [unknown, unknown])[1];
          const k = canonical(key);
          const i = state.indexOf(k);
          if (i >= 0) state.values[i] = fold.merge(state.values[i], partial, key);
          else state.insert(k, fold.fromPartial(partial, key));
        }
      : (r) => {
          const key = keyFn(r);
          const k = canonical(key);
          let i = state.indexOf(k);
          if (i >= 0) state.values[i] = fold.next(state.values[i], r, key);
          else i = state.insert(k, fold.first(r, key));
          if (updates) return next(fold.result(state.values[i]));
        };
  return {
    emit,
    get size() {
      return state.size;
    },
    async finish() {
      if (updates) return;
      const { values } = state;
      for (let n = 0; n < values.length; n++) {
        const p = next(fold.result(values[n]));
        if (p !== undefined) await p;
        if ((n + 1) % 1024 === 0) {
          if (signal?.aborted) throw signal.reason;
          await yieldToEventLoop();
        }
      }
      state = new KeyTable();
    },
  };
}

/**
 * A combiner's canonical form of a key the selector after `producer` returned; an unusable key fails
 * naming that producer.
 */
export function combinerKeyOf(producer: string | undefined): (key: unknown) => string {
  return (key) => {
    try {
      return canonicalKey(key);
    } catch (e) {
      if (e instanceof InvalidKeyError)
        throw new InvalidKeyError(`the key selector after ${producer ?? 'the producer'} returned an unusable key: ${e.message}`);
      throw e;
    }
  };
}

/** The producer side of pre-aggregation: partial results per key, sent on in bounded batches. */
export interface KeyedCombiner {
  /** Folds one record into its key's partial; a promise when a flush had to wait for the network. */
  add(record: unknown): Promise<void> | void;
  /** Sends every partial held (end of input) and starts over. */
  flush(): Promise<void>;
  /** Keys held. */
  readonly size: number;
}

/** Sends one `[key, partial]` pair; `canonical` is the key's canonical form, for routing. */
export type SendPartial = (canonical: string, pair: [key: unknown, partial: unknown]) => Promise<void> | void;

/**
 * Folds records per key with the keyed operator's own functions, as that operator would, but holds at
 * most `maxKeys` keys: past that, every partial is sent and the map starts over, so memory stays bounded
 * whatever the number of distinct keys (a key may then reach the operator in several partials, which it
 * merges). `keySelector` is the hash edge's (the operator's) selector.
 */
export function keyedCombiner(
  op: KeyedOperatorSpec,
  f: KeyedFunctions,
  keySelector: (record: unknown) => unknown,
  send: SendPartial,
  maxKeys: number,
  options: { readonly signal?: TaskSignal; /** Names the producer in an unusable key's message. */ readonly producer?: string } = {},
): KeyedCombiner {
  const { signal, producer } = options;
  const fold = foldOf(op, f);
  const canonical = combinerKeyOf(producer);
  // Per key (canonical form) the partial state, and in `selected` the key as the selector returned it.
  let held = new KeyTable<unknown>();
  let selected: unknown[] = [];
  const flush = async (): Promise<void> => {
    const { keys, values } = held;
    const originals = selected;
    held = new KeyTable();
    selected = [];
    for (let n = 0; n < keys.length; n++) {
      const p = send(keys[n]!, [originals[n], fold.partial(values[n])]);
      if (p !== undefined) await p;
      if ((n + 1) % 1024 === 0 && signal?.aborted) throw signal.reason;
    }
  };
  return {
    add(r) {
      const key = keySelector(r);
      const k = typeof key === 'string' && key.length > 0 && key.charCodeAt(0) > 1 ? key : canonical(key);
      const i = held.indexOf(k);
      if (i >= 0) {
        held.values[i] = fold.next(held.values[i], r, key);
        return;
      }
      held.insert(k, fold.first(r, key));
      selected.push(key);
      if (held.size > maxKeys) return flush();
    },
    flush,
    get size() {
      return held.size;
    },
  };
}
