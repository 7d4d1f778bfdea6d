// The producer side of a pre-aggregated window operator (Flink SQL's local window aggregation): a task
// whose output feeds a keyed.window with `preAggregate` folds its records per key and pane (a slice of
// gcd(size, slide) ms, as the window operator keeps them) with the window's reduce or aggregate add, and
// sends each pane's partials, stamped with the pane's last millisecond, when the task's watermark passes
// the pane: on the wire, batches `[PARTIAL_BATCH, keys, partials]` of the keys one subtask owns (one record
// per batch instead of one per key: the codec's and the input's work per record is paid once per batch). The pair reaches the window operator before that watermark, so it is
// in every window it belongs to before the window fires. A record whose pane the watermark has already
// passed goes on at once as a partial of its own, exactly when the record itself would have.
import { TimeWindow } from '../api/windowing.js';
import type { FunctionRef } from '../jobgraph/jobgraph.js';
import type { WindowOperatorSpec } from './window-operator.js';
import { WindowTimestampError } from './window-operator.js';
import { KeyTable } from './key-table.js';
import { combinerKeyOf, type KeyedCombiner } from './keyed-operators.js';

/**
 * Sends partials stamped `timestamp`: `partials[i]` of key `keys[i]`, whose canonical form (what routes it to
 * its subtask) is `canonicals[i]`. The arrays are the sender's from then on.
 */
export type SendWindowPartials = (
  canonicals: readonly string[],
  keys: readonly unknown[],
  partials: readonly unknown[],
  timestamp: number,
) => Promise<void> | void;

/** The first element of a batch of partials on the wire: `[PARTIAL_BATCH, keys, partials]` (a partial pair has two elements). */
export const PARTIAL_BATCH = 1;

/** Whether `element`, an input of a pre-aggregated window operator, is a batch `[PARTIAL_BATCH, keys, partials]`. */
export const isPartialBatch = (element: unknown): element is [typeof PARTIAL_BATCH, unknown[], unknown[]] =>
  Array.isArray(element) && element.length === 3 && element[0] === PARTIAL_BATCH;

export interface WindowCombiner extends KeyedCombiner {
  add(record: unknown, timestamp?: number): Promise<void> | void;
  /** Sends the partials of every pane `watermark` has passed (before the watermark itself goes on). */
  advanceWatermark(watermark: number): Promise<void> | void;
}

/** The functions that fold records into a partial: the window's reduce, or its aggregate's createAccumulator and add. */
export interface WindowFold {
  first(record: unknown): unknown;
  next(partial: unknown, record: unknown): unknown;
}

/** The fold of `op`'s window function, its user functions resolved by `fn`. */
export function windowFoldOf(op: WindowOperatorSpec, fn: (ref: FunctionRef | undefined, role: string) => (a?: unknown, b?: unknown) => unknown): WindowFold {
  if (op.windowFunction === 'reduce') {
    const reduce = fn(op.reduce, 'reduce');
    return { first: (r) => r, next: (p, r) => reduce(p, r) };
  }
  const create = fn(op.createAccumulator, 'createAccumulator');
  const add = fn(op.add, 'add');
  return { first: (r) => add(r, create()), next: (p, r) => add(r, p) };
}

/**
 * The partials of one pane: per key (canonical form) the partial, and the key as the selector returned it;
 * number keys also by themselves (their entry's index), so a record with a known number key makes no string.
 */
interface Pane {
  readonly start: number;
  readonly table: KeyTable<unknown>;
  readonly keys: unknown[];
  readonly numbers: Map<number, number>;
}

/**
 * Folds records per key and pane for window operator `op`. Holds at most `maxKeys` partials: past that,
 * every pane's partials go on early (the window operator merges the later ones into them).
 */
export function windowCombiner(
  op: WindowOperatorSpec,
  fold: WindowFold,
  keySelector: (record: unknown) => unknown,
  send: SendWindowPartials,
  maxKeys: number,
  options: { readonly producer?: string } = {},
): WindowCombiner {
  const { producer } = options;
  const window = op.window;
  if (window.type === 'session') throw new TypeError(`window operator '${op.name}': session windows are never pre-aggregated`);
  const slide = window.type === 'sliding' ? window.slide : window.size;
  const paneSize = gcd(window.size, slide);
  const offset = window.offset;
  const canonicalOf = combinerKeyOf(producer);
  // A plain string key is its own canonical form (see canonicalKey): no call on the hot path.
  const canonical = (key: unknown): string => (typeof key === 'string' && key.length > 0 && key.charCodeAt(0) > 1 ? key : canonicalOf(key));
  const panes = new Map<number, Pane>();
  let held = 0;
  let watermark = -Infinity;
  // The pane records usually fall in: found without the map (and without the modulo of its start).
  let recent: Pane | undefined;
  // The number or string key the last record in `recent` had, and its entry: a run of one key (a hot key,
  // windowAll's one key) folds without a lookup.
  let lastKey: unknown = NO_KEY;
  let lastIndex = -1;

  const sendPane = async (pane: Pane): Promise<void> => {
    held -= pane.keys.length;
    await send(pane.table.keys, pane.keys, pane.table.values, pane.start + paneSize - 1);
  };
  /** Sends the panes whose last millisecond is at or before `upTo`, earliest first. */
  const sendUpTo = async (upTo: number): Promise<void> => {
    const due = [...panes.values()].filter((p) => p.start + paneSize - 1 <= upTo).sort((a, b) => a.start - b.start);
    for (const pane of due) {
      panes.delete(pane.start);
      if (recent === pane) {
        recent = undefined;
        lastKey = NO_KEY;
      }
      await sendPane(pane);
    }
  };

  return {
    add(record, timestamp) {
      if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) throw new WindowTimestampError(op.name, timestamp);
      const key = keySelector(record);
      // A pane in `panes` is one the watermark has not passed.
      let pane = recent;
      if (pane === undefined || timestamp < pane.start || timestamp - pane.start >= paneSize) {
        const start = TimeWindow.getWindowStartWithOffset(timestamp, offset, paneSize);
        if (start + paneSize - 1 <= watermark) return send([canonical(key)], [key], [fold.first(record)], start + paneSize - 1);
        pane = panes.get(start);
        if (pane === undefined) {
          pane = { start, table: new KeyTable(), keys: [], numbers: new Map() };
          panes.set(start, pane);
        }
        recent = pane;
        lastKey = NO_KEY;
      }
      const values = pane.table.values;
      if (key === lastKey) {
        values[lastIndex] = fold.next(values[lastIndex], record);
        return;
      }
      const simple = typeof key === 'number' || typeof key === 'string';
      if (typeof key === 'number') {
        const n = pane.numbers.get(key);
        if (n !== undefined) {
          values[n] = fold.next(values[n], record);
          lastKey = key;
          lastIndex = n;
          return;
        }
      }
      const k = canonical(key);
      const i = pane.table.indexOf(k);
      if (i >= 0) {
        values[i] = fold.next(values[i], record);
        if (simple) {
          lastKey = key;
          lastIndex = i;
        }
        return;
      }
      const inserted = pane.table.insert(k, fold.first(record));
      if (typeof key === 'number') pane.numbers.set(key, inserted);
      if (simple) {
        lastKey = key;
        lastIndex = inserted;
      }
      pane.keys.push(key);
      held++;
      if (held > maxKeys) return sendUpTo(Infinity);
    },
    advanceWatermark(wm) {
      if (wm <= watermark) return;
      watermark = wm;
      for (const pane of panes.values()) if (pane.start + paneSize - 1 <= wm) return sendUpTo(wm);
    },
    flush: () => sendUpTo(Infinity),
    get size() {
      return held;
    },
  };
}

/** No key a selector returns: `lastKey` before any record of the recent pane. */
const NO_KEY = Symbol('no key');

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}
