// The job-building API: a StreamEnvironment records transformations; DataStreams chain them. Nothing runs
// here: the recorded transformations become a JobGraph (translate.ts) and, in a task, the source of the
// user's functions (program.ts).
import type { OperatorKind, Partitioner } from '../jobgraph/jobgraph.js';
import { InvalidJobDefinitionError } from './job-definition.js';

export type MapFunction<T, R> = (value: T) => R;
/** Returns the records to emit for one input record: an array, a Set, a generator… */
export type FlatMapFunction<T, R> = (value: T) => Iterable<R>;
export type FilterFunction<T> = (value: T) => boolean;
export type UserFunction = (...args: any[]) => unknown;

/** What a transformation does, with the parameters of its operator. */
export type TransformationSpec =
  | { readonly kind: 'source.sequence'; readonly from: number; readonly to: number }
  | { readonly kind: 'source.textFile'; readonly path: string; readonly splitSizeBytes: number | undefined }
  | { readonly kind: 'source.collection'; readonly fn: UserFunction }
  | { readonly kind: 'map' | 'flatMap' | 'filter'; readonly fn: UserFunction }
  | { readonly kind: 'sink.textFile'; readonly path: string }
  | { readonly kind: 'sink.collect'; readonly maxRecords: number | undefined };

/** An input of a transformation; `partitioner` is set when the user asked for one (e.g. `rebalance()`). */
export interface StreamInput {
  readonly from: Transformation;
  readonly partitioner?: Partitioner;
}

/** One recorded operator. Its id (`op-<n>`) follows creation order, so re-running a builder yields the same ids. */
export interface Transformation {
  readonly id: string;
  readonly spec: TransformationSpec;
  readonly inputs: readonly StreamInput[];
  /** Non-parallel operators (the collection source) always run with parallelism 1. */
  readonly nonParallel: boolean;
  name: string;
  parallelism: number | undefined;
  slotSharingGroup: string | undefined;
}

const DEFAULT_NAMES: Record<OperatorKind, string> = {
  'source.sequence': 'fromSequence',
  'source.textFile': 'readTextFile',
  'source.collection': 'fromCollection',
  map: 'map',
  flatMap: 'flatMap',
  filter: 'filter',
  'sink.textFile': 'writeAsText',
  'sink.collect': 'collect',
};

function checkParallelism(what: string, n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) {
    throw new InvalidJobDefinitionError(`${what}.setParallelism(n) needs an integer >= 1, found ${JSON.stringify(n)}`);
  }
  return n;
}

function checkName(what: string, name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '') {
    throw new InvalidJobDefinitionError(`${what}.name(name) needs a non-empty string, found ${JSON.stringify(name)}`);
  }
  return name;
}

function checkGroup(what: string, group: unknown): string {
  if (typeof group !== 'string' || group.trim() === '') {
    throw new InvalidJobDefinitionError(`${what}.slotSharingGroup(group) needs a non-empty string, found ${JSON.stringify(group)}`);
  }
  return group;
}

function checkFunction(method: string, fn: unknown): UserFunction {
  if (typeof fn !== 'function') {
    throw new InvalidJobDefinitionError(`${method}(fn) needs a function, found ${fn === null ? 'null' : typeof fn}`);
  }
  return fn as UserFunction;
}

function checkPath(method: string, path: unknown): string {
  if (typeof path !== 'string' || path === '') {
    throw new InvalidJobDefinitionError(`${method}(path) needs a non-empty file path, found ${JSON.stringify(path)}`);
  }
  return path;
}

function setOperatorParallelism(t: Transformation, n: unknown): void {
  const p = checkParallelism(`'${t.name}'`, n);
  if (t.nonParallel && p !== 1) {
    throw new InvalidJobDefinitionError(
      `'${t.name}' is a non-parallel operator and runs with parallelism 1, found setParallelism(${p}); use rebalance() after it to spread its records`,
    );
  }
  t.parallelism = p;
}

export class StreamEnvironment {
  private nextOperatorNumber = 1;
  private defaultParallelism: number | undefined;
  private readonly recorded: Transformation[] = [];

  /** Parallelism of operators that set none; unset means the cluster's `parallelism.default`. */
  setParallelism(parallelism: number): this {
    this.defaultParallelism = checkParallelism('env', parallelism);
    return this;
  }

  getParallelism(): number | undefined {
    return this.defaultParallelism;
  }

  /** The integers from `from` to `to`, both included, split evenly across the source's subtasks. */
  fromSequence(from: number, to: number): OperatorStream<number> {
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from > to) {
      throw new InvalidJobDefinitionError(`fromSequence(from, to) needs safe integers with from <= to, found from=${JSON.stringify(from)}, to=${JSON.stringify(to)}`);
    }
    return new OperatorStream<number>(this, this.add({ kind: 'source.sequence', from, to }, [], false));
  }

  /**
   * The lines of a text file (without their line terminators), read in byte-range splits of
   * `splitSizeBytes` by the source's subtasks. A relative path is resolved against the client's
   * working directory when the job is submitted.
   */
  readTextFile(path: string, options: { readonly splitSizeBytes?: number } = {}): OperatorStream<string> {
    checkPath('readTextFile', path);
    const split = options.splitSizeBytes;
    if (split !== undefined && (!Number.isSafeInteger(split) || split < 1)) {
      throw new InvalidJobDefinitionError(`readTextFile('${path}', { splitSizeBytes }) needs an integer >= 1, found ${JSON.stringify(split)}`);
    }
    return new OperatorStream<string>(this, this.add({ kind: 'source.textFile', path, splitSizeBytes: split }, [], false));
  }

  /**
   * The given elements, in order, from a non-parallel source (parallelism 1). The elements are
   * copied now; they are recreated in the task by re-running the builder, so they must come from
   * the job file and its arguments, not from the client's state.
   */
  fromCollection<T>(elements: Iterable<T>): OperatorStream<T> {
    if (elements === null || elements === undefined || typeof (elements as Iterable<T>)[Symbol.iterator] !== 'function') {
      throw new InvalidJobDefinitionError(`fromCollection(elements) needs an iterable (e.g. an array), found ${elements === null ? 'null' : typeof elements}`);
    }
    const copy: readonly T[] = Object.freeze([...elements]);
    const t = this.add({ kind: 'source.collection', fn: () => copy }, [], true);
    t.parallelism = 1;
    return new OperatorStream<T>(this, t);
  }

  /** Every transformation recorded so far, in creation order. Used by the runtime; not part of the job API. */
  getTransformations(): readonly Transformation[] {
    return this.recorded;
  }

  /** @internal */
  add(spec: TransformationSpec, inputs: readonly StreamInput[], nonParallel: boolean): Transformation {
    const t: Transformation = {
      id: `op-${this.nextOperatorNumber++}`,
      spec,
      inputs,
      nonParallel,
      name: DEFAULT_NAMES[spec.kind],
      parallelism: undefined,
      slotSharingGroup: undefined,
    };
    this.recorded.push(t);
    return t;
  }
}

export class DataStream<T> {
  /** @internal */
  protected readonly env: StreamEnvironment;
  /** @internal */
  protected readonly transformation: Transformation;
  /** @internal Set by partitioning calls such as `rebalance()`; applies to the next operator's input. */
  protected readonly partitioner: Partitioner | undefined;

  /** @internal Streams are made by StreamEnvironment and DataStream methods, not by user code. */
  constructor(env: StreamEnvironment, transformation: Transformation, partitioner?: Partitioner) {
    this.env = env;
    this.transformation = transformation;
    this.partitioner = partitioner;
  }

  map<R>(fn: MapFunction<T, R>): OperatorStream<R> {
    return new OperatorStream<R>(this.env, this.env.add({ kind: 'map', fn: checkFunction('map', fn) }, [this.input()], false));
  }

  flatMap<R>(fn: FlatMapFunction<T, R>): OperatorStream<R> {
    return new OperatorStream<R>(this.env, this.env.add({ kind: 'flatMap', fn: checkFunction('flatMap', fn) }, [this.input()], false));
  }

  filter(fn: FilterFunction<T>): OperatorStream<T> {
    return new OperatorStream<T>(this.env, this.env.add({ kind: 'filter', fn: checkFunction('filter', fn) }, [this.input()], false));
  }

  /** Spreads records round-robin over every subtask of the next operator. */
  rebalance(): DataStream<T> {
    return new DataStream<T>(this.env, this.transformation, 'rebalance');
  }

  /**
   * Writes each record's text (strings as they are, other values as JSON) as one line. The sink
   * writes part files that appear at `path` (a folder, one file per subtask) only when the job finishes.
   * A relative path is resolved against the client's working directory.
   */
  writeAsText(path: string): DataStreamSink {
    checkPath('writeAsText', path);
    return new DataStreamSink(this.env.add({ kind: 'sink.textFile', path }, [this.input()], false));
  }

  /**
   * Sends the records back to the client: `floe run` prints them and `GET /jobs/:id/result` returns
   * them. At most `maxRecords` are kept (default 10 000); the result
   * says when more were dropped. A job has at most one collect sink.
   */
  collect(options: { readonly maxRecords?: number } = {}): DataStreamSink {
    const max = options.maxRecords;
    if (max !== undefined && (!Number.isSafeInteger(max) || max < 0)) {
      throw new InvalidJobDefinitionError(`collect({ maxRecords }) needs an integer >= 0, found ${JSON.stringify(max)}`);
    }
    return new DataStreamSink(this.env.add({ kind: 'sink.collect', maxRecords: max }, [this.input()], false));
  }

  private input(): StreamInput {
    return this.partitioner === undefined ? { from: this.transformation } : { from: this.transformation, partitioner: this.partitioner };
  }
}

/** A stream produced by one operator: its name, parallelism and slot sharing group can be set. */
export class OperatorStream<T> extends DataStream<T> {
  name(name: string): this {
    this.transformation.name = checkName(`'${this.transformation.name}'`, name);
    return this;
  }

  setParallelism(parallelism: number): this {
    setOperatorParallelism(this.transformation, parallelism);
    return this;
  }

  /**
   * Operators of one group may share slots (one subtask of each per slot); a different group gets
   * slots of its own. Unset, an operator takes its inputs' group, or 'default'.
   */
  slotSharingGroup(group: string): this {
    this.transformation.slotSharingGroup = checkGroup(`'${this.transformation.name}'`, group);
    return this;
  }

  /** The operator's id, the same on every run of the builder with the same arguments. */
  getId(): string {
    return this.transformation.id;
  }
}

/** The end of a stream. */
export class DataStreamSink {
  /** @internal */
  private readonly transformation: Transformation;

  /** @internal */
  constructor(transformation: Transformation) {
    this.transformation = transformation;
  }

  name(name: string): this {
    this.transformation.name = checkName(`'${this.transformation.name}'`, name);
    return this;
  }

  setParallelism(parallelism: number): this {
    setOperatorParallelism(this.transformation, parallelism);
    return this;
  }

  slotSharingGroup(group: string): this {
    this.transformation.slotSharingGroup = checkGroup(`'${this.transformation.name}'`, group);
    return this;
  }

  getId(): string {
    return this.transformation.id;
  }
}
