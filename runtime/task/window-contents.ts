// What a window operator keeps of a pane's or a session's elements and how it makes a window's result
// from them: an accumulator folded as elements come (reduce, or an aggregate with merge, or an aggregate
// whose windows are one pane each), or the elements themselves (process, and an aggregate without merge
// over windows made of several panes). A window of several panes merges their accumulators, or reads
// their element lists one after the other: no element is copied per window.

/** A window function a user gave, as the task resolved it. */
export interface ProcessWindowContext {
  /** The window being evaluated (start, end, maxTimestamp()). */
  window(): { readonly start: number; readonly end: number; maxTimestamp(): number };
  currentProcessingTime(): number;
  currentWatermark(): number;
  /** Emits `value` to the side output `tag` (an OutputTag). */
  output(tag: { readonly id: string }, value: unknown): void;
}

/** Flink's ProcessWindowFunction.process(key, context, elements, out). */
export type ProcessWindowCall = (key: unknown, context: ProcessWindowContext, elements: Iterable<unknown>, out: { collect(record: unknown): void }) => unknown;

export type WindowFunctions =
  | { readonly kind: 'reduce'; readonly reduce: (a: unknown, b: unknown) => unknown; readonly process?: ProcessWindowCall }
  | {
      readonly kind: 'aggregate';
      readonly createAccumulator: () => unknown;
      readonly add: (value: unknown, accumulator: unknown) => unknown;
      readonly getResult: (accumulator: unknown) => unknown;
      readonly merge?: (a: unknown, b: unknown) => unknown;
      readonly process?: ProcessWindowCall;
    }
  | { readonly kind: 'process'; readonly process: ProcessWindowCall };

/** A pane's or a session's contents, as stored in keyed state: an accumulator `a`, or elements `e`. */
export type Contents = { a: unknown } | { e: unknown[] };

/** Elements of several lists read in order, as many times as iterated; nothing is copied. */
class ConcatenatedElements implements Iterable<unknown> {
  constructor(private readonly lists: readonly unknown[][]) {}

  *[Symbol.iterator](): Iterator<unknown> {
    for (const list of this.lists) yield* list;
  }
}

export class WindowContents {
  /** Keeps the elements (true) or an accumulator (false). */
  readonly keepsElements: boolean;

  /** `merges`: windows combine several contents (sliding windows of several panes, sessions). */
  constructor(
    private readonly fns: WindowFunctions,
    merges: boolean,
  ) {
    this.keepsElements = fns.kind === 'process' || (fns.kind === 'aggregate' && fns.merge === undefined && merges);
  }

  /** Contents holding `value` alone. */
  create(value: unknown): Contents {
    if (this.keepsElements) return { e: [value] };
    const fns = this.fns;
    return { a: fns.kind === 'aggregate' ? fns.add(value, fns.createAccumulator()) : value };
  }

  add(contents: Contents, value: unknown): void {
    if ('e' in contents) {
      contents.e.push(value);
      return;
    }
    const fns = this.fns;
    if (fns.kind === 'reduce') contents.a = fns.reduce(contents.a, value);
    else if (fns.kind === 'aggregate') contents.a = fns.add(value, contents.a);
  }

  /** Folds `from` into `into` (sessions that merge). */
  merge(into: Contents, from: Contents): void {
    if ('e' in into && 'e' in from) {
      for (const v of from.e) into.e.push(v);
      return;
    }
    if (!('a' in into) || !('a' in from)) return;
    const fns = this.fns;
    if (fns.kind === 'reduce') into.a = fns.reduce(into.a, from.a);
    else if (fns.kind === 'aggregate' && fns.merge !== undefined) into.a = fns.merge(into.a, from.a);
  }

  /** What a window of `parts[from..to)` (in time order) emits through its process function: its elements, or its one result. */
  elements(parts: readonly Contents[], from = 0, to = parts.length): Iterable<unknown> {
    if (this.fns.kind === 'process') {
      const lists: unknown[][] = [];
      for (let i = from; i < to; i++) {
        const p = parts[i]!;
        lists.push('e' in p ? p.e : [p.a]);
      }
      return lists.length === 1 ? lists[0]! : new ConcatenatedElements(lists);
    }
    return [this.result(parts, from, to)];
  }

  /** The result of a reduce or aggregate over a window of `parts[from..to)` (in time order). */
  result(parts: readonly Contents[], from = 0, to = parts.length): unknown {
    const fns = this.fns;
    if (fns.kind === 'process') throw new Error('a process window function has no incremental result');
    if (fns.kind === 'reduce') {
      let acc = (parts[from] as { a: unknown }).a;
      for (let i = from + 1; i < to; i++) acc = fns.reduce(acc, (parts[i] as { a: unknown }).a);
      return acc;
    }
    if (this.keepsElements) {
      let acc = fns.createAccumulator();
      for (let i = from; i < to; i++) for (const v of (parts[i] as { e: unknown[] }).e) acc = fns.add(v, acc);
      return fns.getResult(acc);
    }
    if (to - from === 1) return fns.getResult((parts[from] as { a: unknown }).a);
    // A fresh accumulator takes the panes' ones, which stay as they are for the windows that follow.
    let acc = fns.createAccumulator();
    for (let i = from; i < to; i++) acc = fns.merge!(acc, (parts[i] as { a: unknown }).a);
    return fns.getResult(acc);
  }
}
