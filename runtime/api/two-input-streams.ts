// Two-input streams with Flink's names: `a.connect(b)` (ConnectedStreams: map / flatMap / process, keyBy),
// `keyedA.intervalJoin(keyedB).between(lower, upper).process(fn)`, `a.join(b).where(ka).equalTo(kb)
// .window(assigner).apply(fn)` (and coGroup), and broadcast state: `s.broadcast(descriptor)` gives a
// BroadcastStream that a keyed or plain stream connects to. These methods are added to DataStream and
// KeyedStream here (declaration merging), so datastream.ts needs no import of this file: index.ts and
// program.ts load it, and every stream of a job has them.
import type { Partitioner } from '../jobgraph/jobgraph.js';
import type { MapStateDescriptor } from './state.js';
import { checkFunction } from './argument-checks.js';
import type {
  BroadcastProcessFunction,
  CoFlatMapFunction,
  CoGroupFunction,
  CoMapFunction,
  CoProcessFunction,
  JoinFunction,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  ProcessJoinFunction,
} from './co-functions.js';
import { DataStream, KeyedStream, OperatorStream, type StreamEnvironment } from './datastream.js';
import { InvalidJobDefinitionError } from './errors.js';
import type { EncodableKey, KeySelector, UserFunction } from './functions.js';
import type { StreamInput } from './transformation.js';
import type { TwoInputTransformationSpec } from './two-input-transformations.js';
import type { WindowAssigner } from './windowing.js';

declare module './datastream.js' {
  interface DataStream<T> {
    /** Pairs this stream with the broadcast stream `other`: process(BroadcastProcessFunction) reads its broadcast state. */
    connect<T2>(other: BroadcastStream<T2>): BroadcastConnectedStream<T, T2>;
    /** Pairs this stream with `other` (of any type) for a CoMap, CoFlatMap or CoProcessFunction; keyBy both for keyed state. */
    connect<T2>(other: DataStream<T2>): ConnectedStreams<T, T2>;
    /** A stream every subtask of the next operator receives whole, whose records write the broadcast states named by `descriptors`. */
    broadcast(...descriptors: [MapStateDescriptor<unknown, unknown>, ...MapStateDescriptor<unknown, unknown>[]]): BroadcastStream<T>;
    /** A window join with `other`: `.where(key).equalTo(otherKey).window(assigner).apply(joinFunction)`. */
    join<T2>(other: DataStream<T2>): JoinedStreams<T, T2>;
    /** A window coGroup with `other`: `.where(key).equalTo(otherKey).window(assigner).apply(coGroupFunction)`. */
    coGroup<T2>(other: DataStream<T2>): CoGroupedStreams<T, T2>;
  }
  interface KeyedStream<T, K> {
    /** Pairs this keyed stream with a broadcast stream: process(KeyedBroadcastProcessFunction). */
    connect<T2>(other: BroadcastStream<T2>): KeyedBroadcastConnectedStream<T, T2, K>;
    /** Pairs two streams keyed alike (same key type): process(KeyedCoProcessFunction) with keyed state and timers. */
    connect<T2>(other: KeyedStream<T2, K>): KeyedConnectedStreams<T, T2, K>;
    /** Pairs this keyed stream with a stream that is not keyed: no keyed state (use keyBy on both for that). */
    connect<T2>(other: DataStream<T2>): ConnectedStreams<T, T2>;
    /** Joins each record with the other stream's records of its key within an interval of event time: `.between(lowerMs, upperMs).process(fn)`. */
    intervalJoin<T2>(other: KeyedStream<T2, K>): IntervalJoin<T, T2>;
  }
}

/** What the streams hold and this file reads: their environment, inputs and (keyed) key selector. */
interface StreamInternals {
  readonly env: StreamEnvironment;
  readonly inputs: readonly StreamInput[];
  readonly key?: UserFunction;
}
const internals = (stream: unknown): StreamInternals => stream as StreamInternals;

/** The inputs of the second input of a two-input operator: JobEdge.targetInput 1, hash edges routed by the operator's 'key2'. */
const asSecond = (inputs: readonly StreamInput[], keyRole?: string): StreamInput[] =>
  inputs.map((i) => ({ ...i, targetInput: 1, ...(keyRole !== undefined ? { keyRole } : {}) }));

const hashed = (inputs: readonly StreamInput[], keySelector: UserFunction): StreamInput[] =>
  inputs.map((i): StreamInput => ({ from: i.from, partitioner: 'hash', keySelector, ...(i.exchange !== undefined ? { exchange: i.exchange } : {}) }));

function checkObject(call: string, fn: unknown, methods: readonly string[], expected: string): object {
  const missing = fn === null || typeof fn !== 'object' ? methods : methods.filter((m) => typeof (fn as Record<string, unknown>)[m] !== 'function');
  if (missing.length > 0) {
    throw new InvalidJobDefinitionError(
      `${call} needs ${expected} (an object with ${methods.map((m) => `${m}()`).join(' and ')}), found ${fn === null ? 'null' : typeof fn}${typeof fn === 'object' && fn !== null ? ` without ${missing.join(', ')}` : ''}`,
    );
  }
  return fn as object;
}

function checkSameEnv(call: string, a: StreamEnvironment, b: StreamEnvironment): void {
  if (a !== b) {
    throw new InvalidJobDefinitionError(
      `${call}: the other stream belongs to another StreamEnvironment; build every stream of a job on the env its builder receives`,
    );
  }
}

function add<R>(env: StreamEnvironment, spec: TwoInputTransformationSpec, first: readonly StreamInput[], second: readonly StreamInput[]): OperatorStream<R> {
  return new OperatorStream<R>(env, env.add(spec, [...first, ...second], false));
}

/** A stream every subtask of its consumer receives whole, carrying the names of the broadcast states its records write. */
export class BroadcastStream<T> {
  /** Only for the compiler: keeps T. */
  declare readonly __elementType?: T;

  /** @internal */
  constructor(
    readonly env: StreamEnvironment,
    readonly inputs: readonly StreamInput[],
    readonly broadcastStates: readonly string[],
  ) {}
}

/** Two streams of possibly different types, processed by one operator that knows which input a record came from. */
export class ConnectedStreams<IN1, IN2> {
  /** @internal `key1` / `key2`: the key selectors of inputs that are keyed (they route records; the operator keeps no keyed state). */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly second: readonly StreamInput[],
    private readonly key1?: UserFunction,
    private readonly key2?: UserFunction,
  ) {}

  map<R>(fn: CoMapFunction<IN1, IN2, R>): OperatorStream<R> {
    return this.co('co.map', checkObject('connect(…).map(fn)', fn, ['map1', 'map2'], 'a CoMapFunction'));
  }

  flatMap<R>(fn: CoFlatMapFunction<IN1, IN2, R>): OperatorStream<R> {
    return this.co('co.flatMap', checkObject('connect(…).flatMap(fn)', fn, ['flatMap1', 'flatMap2'], 'a CoFlatMapFunction'));
  }

  process<R>(fn: CoProcessFunction<IN1, IN2, R>): OperatorStream<R> {
    return this.co('co.process', checkObject('connect(…).process(fn)', fn, ['processElement1', 'processElement2'], 'a CoProcessFunction'));
  }

  private co<R>(kind: 'co.map' | 'co.flatMap' | 'co.process', fn: object): OperatorStream<R> {
    const keys = { ...(this.key1 !== undefined ? { key: this.key1 } : {}), ...(this.key2 !== undefined ? { key2: this.key2 } : {}) };
    return add(this.env, { kind, fn, ...keys }, this.first, asSecond(this.second, this.key2 !== undefined ? 'key2' : undefined));
  }

  /** Keys both inputs (records with equal keys meet in one subtask), for a KeyedCoProcessFunction. */
  keyBy<K>(key1: KeySelector<IN1, K & EncodableKey<K>>, key2: KeySelector<IN2, K & EncodableKey<K>>): KeyedConnectedStreams<IN1, IN2, K> {
    const k1 = checkFunction('connect(…).keyBy(key1, key2)', key1);
    const k2 = checkFunction('connect(…).keyBy(key1, key2)', key2);
    return new KeyedConnectedStreams<IN1, IN2, K>(this.env, hashed(this.first, k1), hashed(this.second, k2), k1, k2);
  }
}

/** Two streams keyed alike: their operator keeps state and timers per key. */
export class KeyedConnectedStreams<IN1, IN2, K> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly second: readonly StreamInput[],
    private readonly key1: UserFunction,
    private readonly key2: UserFunction,
  ) {}

  process<R>(fn: KeyedCoProcessFunction<K, IN1, IN2, R>): OperatorStream<R> {
    const f = checkObject('connect(…).process(fn)', fn, ['processElement1', 'processElement2'], 'a KeyedCoProcessFunction');
    return add(this.env, { kind: 'keyed.coProcess', key: this.key1, key2: this.key2, fn: f }, this.first, asSecond(this.second, 'key2'));
  }

  map<R>(fn: CoMapFunction<IN1, IN2, R>): OperatorStream<R> {
    return new ConnectedStreams<IN1, IN2>(this.env, this.first, this.second, this.key1, this.key2).map(fn);
  }

  flatMap<R>(fn: CoFlatMapFunction<IN1, IN2, R>): OperatorStream<R> {
    return new ConnectedStreams<IN1, IN2>(this.env, this.first, this.second, this.key1, this.key2).flatMap(fn);
  }
}

/** A stream connected to a broadcast stream. */
export class BroadcastConnectedStream<IN1, IN2> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly broadcast: BroadcastStream<IN2>,
  ) {}

  process<R>(fn: BroadcastProcessFunction<IN1, IN2, R>): OperatorStream<R> {
    const f = checkObject('connect(broadcastStream).process(fn)', fn, ['processElement', 'processBroadcastElement'], 'a BroadcastProcessFunction');
    return add(this.env, { kind: 'broadcast.process', fn: f, broadcastStates: this.broadcast.broadcastStates }, this.first, asSecond(this.broadcast.inputs));
  }
}

/** A keyed stream connected to a broadcast stream. */
export class KeyedBroadcastConnectedStream<IN1, IN2, K> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly key: UserFunction,
    private readonly broadcast: BroadcastStream<IN2>,
  ) {}

  process<R>(fn: KeyedBroadcastProcessFunction<K, IN1, IN2, R>): OperatorStream<R> {
    const f = checkObject('connect(broadcastStream).process(fn)', fn, ['processElement', 'processBroadcastElement'], 'a KeyedBroadcastProcessFunction');
    return add(
      this.env,
      { kind: 'keyed.broadcastProcess', key: this.key, fn: f, broadcastStates: this.broadcast.broadcastStates },
      this.first,
      asSecond(this.broadcast.inputs),
    );
  }
}

/** `keyedA.intervalJoin(keyedB)`: set the bounds with between(lowerMs, upperMs). */
export class IntervalJoin<IN1, IN2> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly left: StreamInternals,
    private readonly right: StreamInternals,
  ) {}

  /** A left record at t joins the right records of its key at t + lowerMs … t + upperMs (both included). */
  between(lowerMs: number, upperMs: number): IntervalJoined<IN1, IN2> {
    for (const [what, v] of [
      ['lowerMs', lowerMs],
      ['upperMs', upperMs],
    ] as const) {
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
        throw new InvalidJobDefinitionError(
          `intervalJoin(…).between(lowerMs, upperMs) needs ${what} as an integer number of milliseconds, found ${JSON.stringify(v)}`,
        );
      }
    }
    if (lowerMs > upperMs) {
      throw new InvalidJobDefinitionError(`intervalJoin(…).between(lowerMs, upperMs) needs lowerMs <= upperMs, found ${lowerMs} > ${upperMs}`);
    }
    return new IntervalJoined<IN1, IN2>(this.env, this.left, this.right, lowerMs, upperMs);
  }
}

export class IntervalJoined<IN1, IN2> {
  private lowerExclusive = false;
  private upperExclusive = false;

  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly left: StreamInternals,
    private readonly right: StreamInternals,
    private readonly lowerMs: number,
    private readonly upperMs: number,
  ) {}

  /** The lower bound itself does not join. */
  lowerBoundExclusive(): this {
    this.lowerExclusive = true;
    return this;
  }

  /** The upper bound itself does not join. */
  upperBoundExclusive(): this {
    this.upperExclusive = true;
    return this;
  }

  /** Calls fn.processElement(left, right, ctx, out) once per joined pair; the pair's timestamp is the larger of the two. */
  process<R>(fn: ProcessJoinFunction<IN1, IN2, R>): OperatorStream<R> {
    const f = checkObject('intervalJoin(…).between(…).process(fn)', fn, ['processElement'], 'a ProcessJoinFunction');
    return add(
      this.env,
      {
        kind: 'keyed.intervalJoin',
        key: this.left.key!,
        key2: this.right.key!,
        fn: f,
        lowerMs: this.lowerMs,
        upperMs: this.upperMs,
        lowerBoundExclusive: this.lowerExclusive,
        upperBoundExclusive: this.upperExclusive,
      },
      this.left.inputs,
      asSecond(this.right.inputs, 'key2'),
    );
  }
}

type WindowMode = 'join' | 'coGroup';

/** Records the window join or coGroup once its keys, window and function are known. */
function windowJoin<R>(
  env: StreamEnvironment,
  mode: WindowMode,
  first: readonly StreamInput[],
  second: readonly StreamInput[],
  key1: UserFunction,
  key2: UserFunction,
  assigner: WindowAssigner<unknown>,
  fn: unknown,
): OperatorStream<R> {
  const window = checkJoinWindow(mode, assigner);
  const f = checkFunction(`${mode}(…).where(…).equalTo(…).window(…).apply(fn)`, fn as UserFunction);
  return add(env, { kind: 'keyed.windowJoin', key: key1, key2, fn: f, assigner, mode, window }, hashed(first, key1), asSecond(hashed(second, key2), 'key2'));
}

/** `a.join(b)`: `.where(keyOfA).equalTo(keyOfB).window(TumblingEventTimeWindows.of(ms)).apply((a, b) => …)`. */
export class JoinedStreams<IN1, IN2> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly second: readonly StreamInput[],
  ) {}

  where<K>(key1: KeySelector<IN1, K & EncodableKey<K>>): {
    equalTo(key2: KeySelector<IN2, K>): {
      /** Joins in event-time tumbling or sliding windows; each pair of one key in one window gives apply's fn(a, b), stamped with the window's last millisecond. */
      window(assigner: WindowAssigner<unknown>): { apply<R>(fn: JoinFunction<IN1, IN2, R>): OperatorStream<R> };
    };
  } {
    const k1 = checkFunction('join(…).where(key)', key1);
    return {
      equalTo: (key2) => {
        const k2 = checkFunction('join(…).where(…).equalTo(key)', key2);
        return { window: (assigner) => ({ apply: (fn) => windowJoin(this.env, 'join', this.first, this.second, k1, k2, assigner, fn) }) };
      },
    };
  }
}

/** `a.coGroup(b)`: `.where(keyOfA).equalTo(keyOfB).window(assigner).apply((as, bs, out) => …)`. */
export class CoGroupedStreams<IN1, IN2> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly first: readonly StreamInput[],
    private readonly second: readonly StreamInput[],
  ) {}

  where<K>(key1: KeySelector<IN1, K & EncodableKey<K>>): {
    equalTo(key2: KeySelector<IN2, K>): {
      /** Calls apply's fn(as, bs, out) once per key and window with records on either side. */
      window(assigner: WindowAssigner<unknown>): { apply<R>(fn: CoGroupFunction<IN1, IN2, R>): OperatorStream<R> };
    };
  } {
    const k1 = checkFunction('coGroup(…).where(key)', key1);
    return {
      equalTo: (key2) => {
        const k2 = checkFunction('coGroup(…).where(…).equalTo(key)', key2);
        return { window: (assigner) => ({ apply: (fn) => windowJoin(this.env, 'coGroup', this.first, this.second, k1, k2, assigner, fn) }) };
      },
    };
  }
}

/** A window join's assigner: event time, not merging; its size, slide and offset kept as plain data. */
function checkJoinWindow(call: string, assigner: unknown): { sizeMs: number; slideMs?: number; offsetMs: number } {
  const a = assigner as { isEventTime?: () => boolean; isMergeable?: () => boolean; size?: unknown; slide?: unknown; offset?: unknown } | null;
  if (a === null || typeof a !== 'object' || typeof a.isEventTime !== 'function' || typeof (a as { assignWindows?: unknown }).assignWindows !== 'function') {
    throw new InvalidJobDefinitionError(
      `${call}(…).window(assigner) needs a window assigner such as TumblingEventTimeWindows.of(ms), found ${a === null ? 'null' : typeof a}`,
    );
  }
  if (!a.isEventTime() || a.isMergeable?.() === true || typeof a.size !== 'number') {
    throw new InvalidJobDefinitionError(
      `${call}(…).window(assigner) joins on event-time tumbling or sliding windows (TumblingEventTimeWindows.of(ms), SlidingEventTimeWindows.of(size, slide)); found ${a.constructor?.name ?? 'another assigner'}`,
    );
  }
  return { sizeMs: a.size, ...(typeof a.slide === 'number' ? { slideMs: a.slide } : {}), offsetMs: typeof a.offset === 'number' ? a.offset : 0 };
}

// ---- the methods added to DataStream and KeyedStream ------------------------------------------------------

const isDescriptor = (d: unknown): d is MapStateDescriptor<unknown, unknown> =>
  d !== null && typeof d === 'object' && typeof (d as { name?: unknown }).name === 'string' && typeof (d as { kind?: unknown }).kind === 'string';

const plainBroadcast = Object.getOwnPropertyDescriptor(DataStream.prototype, 'broadcast')!.value as (
  this: DataStream<unknown>,
  ...args: unknown[]
) => DataStream<unknown>;

Object.assign(DataStream.prototype, {
  connect(this: DataStream<unknown>, other: unknown): unknown {
    const self = internals(this);
    if (other instanceof BroadcastStream) {
      checkSameEnv('connect(broadcastStream)', self.env, other.env);
      return new BroadcastConnectedStream(self.env, self.inputs, other);
    }
    if (!(other instanceof DataStream || other instanceof KeyedStream)) {
      throw new InvalidJobDefinitionError(`connect(other) needs a DataStream, KeyedStream or BroadcastStream, found ${other === null ? 'null' : typeof other}`);
    }
    const o = internals(other);
    checkSameEnv('connect(other)', self.env, o.env);
    return new ConnectedStreams(self.env, self.inputs, o.inputs, undefined, other instanceof KeyedStream ? o.key : undefined);
  },
  broadcast(this: DataStream<unknown>, ...args: unknown[]): unknown {
    if (args.length === 0 || !isDescriptor(args[0])) return plainBroadcast.apply(this, args);
    const bad = args.findIndex((d) => !isDescriptor(d) || d.kind !== 'map');
    if (bad >= 0) {
      throw new InvalidJobDefinitionError(
        `broadcast(...descriptors) needs MapStateDescriptors (new MapStateDescriptor<K, V>('name')), argument ${bad + 1} is not one`,
      );
    }
    const names = (args as MapStateDescriptor<unknown, unknown>[]).map((d) => d.name);
    if (new Set(names).size !== names.length)
      throw new InvalidJobDefinitionError(`broadcast(...descriptors) names a broadcast state twice: ${names.join(', ')}`);
    const self = internals(this);
    const partitioner: Partitioner = 'broadcast';
    return new BroadcastStream(
      self.env,
      self.inputs.map((i) => ({ from: i.from, partitioner, ...(i.exchange !== undefined ? { exchange: i.exchange } : {}) })),
      names,
    );
  },
  join(this: DataStream<unknown>, other: DataStream<unknown>): unknown {
    checkSameEnv('join(other)', internals(this).env, internals(other).env);
    return new JoinedStreams(internals(this).env, internals(this).inputs, internals(other).inputs);
  },
  coGroup(this: DataStream<unknown>, other: DataStream<unknown>): unknown {
    checkSameEnv('coGroup(other)', internals(this).env, internals(other).env);
    return new CoGroupedStreams(internals(this).env, internals(this).inputs, internals(other).inputs);
  },
});

Object.assign(KeyedStream.prototype, {
  connect(this: KeyedStream<unknown, unknown>, other: unknown): unknown {
    const self = internals(this);
    if (other instanceof BroadcastStream) {
      checkSameEnv('connect(broadcastStream)', self.env, other.env);
      return new KeyedBroadcastConnectedStream(self.env, self.inputs, self.key!, other);
    }
    if (other instanceof DataStream) {
      checkSameEnv('connect(other)', self.env, internals(other).env);
      return new ConnectedStreams(self.env, self.inputs, internals(other).inputs, self.key);
    }
    if (!(other instanceof KeyedStream)) {
      throw new InvalidJobDefinitionError(
        `keyedStream.connect(other) needs a KeyedStream, DataStream or BroadcastStream, found ${other === null ? 'null' : typeof other}`,
      );
    }
    const o = internals(other);
    checkSameEnv('connect(other)', self.env, o.env);
    return new KeyedConnectedStreams(self.env, self.inputs, o.inputs, self.key!, o.key!);
  },
  intervalJoin(this: KeyedStream<unknown, unknown>, other: unknown): unknown {
    if (!(other instanceof KeyedStream)) {
      throw new InvalidJobDefinitionError(
        `intervalJoin(other) needs a KeyedStream keyed by the same kind of key, found ${other === null ? 'null' : typeof other}`,
      );
    }
    checkSameEnv('intervalJoin(other)', internals(this).env, internals(other).env);
    return new IntervalJoin(internals(this).env, internals(this), internals(other));
  },
});
