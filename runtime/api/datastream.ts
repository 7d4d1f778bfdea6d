// The job-building API: a StreamEnvironment records transformations; DataStreams chain them. Nothing runs
// here: the recorded transformations become a JobGraph (translate.ts) and, in a task, the source of the
// user's functions (program.ts). The streams (DataStream, KeyedStream, OperatorStream, DataStreamSink)
// and the environment make one another, so they share this file; what they record is in
// transformation.ts, the user functions' types in functions.ts, the checks of their arguments in
// argument-checks.ts.
/* eslint-disable max-lines -- the streams make one another (keyBy, window, connect, process, getSideOutput) and files may not import in a circle, so every stream class of the API lives here */
import type { ResourceProfile } from '../core/resource-profile.js';
import type { ExtremumKind, Partitioner, RestartStrategySpec, WriteMode } from '../jobgraph/jobgraph.js';
import {
  checkExchange,
  checkField,
  checkFunction,
  checkGroup,
  checkMaxParallelism,
  checkName,
  checkUserObject,
  checkParallelism,
  checkPath,
  checkProfile,
  setOperatorParallelism,
  WRITE_MODES,
} from './argument-checks.js';
import { connectorSinkSpec, isConnectorSink, sourceDescriptorOf, withWatermarks, type Sink, type Source } from './connectors.js';
import { dataGeneratorOf } from './data-generator-source.js';
import { InvalidJobDefinitionError } from './errors.js';
import { ExecutionConfig } from './execution-config.js';
import type { FileSink } from './file-sink.js';
import {
  RichFunctionAdapter,
  type KeyedProcessFunction,
  type ProcessFunction,
  type RichFilterFunction,
  type RichFlatMapFunction,
  type RichMapFunction,
} from './process-function.js';
import { outputTagId, type OutputTag } from './output-tag.js';
import { CheckpointConfig, checkCheckpointInterval, checkCheckpointingMode, type CheckpointingMode } from './checkpoint-config.js';
import { checkWatermarkStrategy, type WatermarkStrategy } from './watermark-strategy.js';
import type {
  AggregateFunction,
  ComparableField,
  EncodableKey,
  FilterFunction,
  FlatMapFunction,
  GeneratorFunction,
  KeySelector,
  MapFunction,
  NumericField,
  ReduceFunction,
  UserFunction,
} from './functions.js';
import {
  aggregateWindowSpec,
  checkLateness,
  lateDataTagOf,
  processWindowSpec,
  reduceWindowSpec,
  triggerSpecOf,
  windowSpecOf,
  type ProcessAllWindowFunction,
  type ProcessWindowFunction,
  type WindowSettings,
} from './window-functions.js';
import type { SideOutputTag } from './co-functions.js';
import type { TimeWindow, Trigger, WindowAssigner } from './windowing.js';
import { DEFAULT_NAMES, type ExchangeMode, type ExchangeOptions, type StreamInput, type Transformation, type TransformationSpec } from './transformation.js';

export interface GenerateOptions {
  /** How many records; unset, the source never ends (an unbounded stream, until the job is cancelled). */
  readonly count?: number;
  /** At most this many records per second over all the source's subtasks. @default - as fast as possible */
  readonly ratePerSecond?: number;
}

/** Options of `writeAsText`. */
export interface WriteAsTextOptions {
  /**
   * What the sink may do to an existing target, as Flink's FileSystem.WriteMode. 'no-overwrite' refuses
   * (at submission) a target that exists and is not an empty folder; 'overwrite' also replaces an
   * earlier Floe output there (a folder whose `_SUCCESS` manifest lists its part files), and still
   * refuses a target holding anything Floe did not write. Neither ever turns a file into a folder.
   * @default 'no-overwrite'
   */
  readonly writeMode?: WriteMode;
}

export class StreamEnvironment {
  private readonly config = new ExecutionConfig();
  private readonly checkpointConfig = new CheckpointConfig();
  private readonly uids = new Map<string, Transformation>();
  private nextOperatorNumber = 1;
  private defaultParallelism: number | undefined;
  private defaultMaxParallelism: number | undefined;
  private chainingEnabled = true;
  private defaultExchange: ExchangeMode = 'pipelined';
  private restartStrategy: RestartStrategySpec | undefined;
  private readonly recorded: Transformation[] = [];
  private readonly groupProfiles = new Map<string, ResourceProfile>();

  getConfig(): ExecutionConfig {
    return this.config;
  }

  /**
   * Checkpoints the job every `intervalMs` (at least 10 ms), in `mode` (@default - the cluster's
   * 'execution.checkpointing.mode', EXACTLY_ONCE unless changed): its state and its sources' positions are
   * snapshotted consistently and restored after a failure. Give stateful operators a `uid(…)`.
   */
  enableCheckpointing(intervalMs: number, mode?: CheckpointingMode): this {
    checkCheckpointInterval('enableCheckpointing(ms, mode?)', intervalMs);
    if (mode !== undefined) this.checkpointConfig.setCheckpointingMode(checkCheckpointingMode('enableCheckpointing(ms, mode)', mode));
    this.checkpointConfig.setCheckpointInterval(intervalMs);
    return this;
  }

  /** The job's checkpoint settings (Flink's CheckpointConfig): timeout, min pause, unaligned checkpoints, retention… */
  getCheckpointConfig(): CheckpointConfig {
    return this.checkpointConfig;
  }

  /** @internal Gives `t` the uid `uid`, which no other operator of the job may have. */
  assignUid(t: Transformation, uid: unknown): void {
    if (typeof uid !== 'string' || uid.trim() === '' || uid.length > 256) {
      throw new InvalidJobDefinitionError(
        `'${t.name}'.uid(uid) needs a non-empty string of at most 256 characters, found ${JSON.stringify(uid) ?? String(uid)}`,
      );
    }
    const holder = this.uids.get(uid);
    if (holder !== undefined && holder !== t) {
      throw new InvalidJobDefinitionError(
        `'${t.name}'.uid('${uid}'): operator '${holder.name}' has this uid already; a uid names one operator's state in checkpoints and savepoints, so each must be unique in the job`,
      );
    }
    if (t.uid !== undefined) this.uids.delete(t.uid);
    t.uid = uid;
    this.uids.set(uid, t);
  }

  /** Runs every operator in a task of its own: no two operators are fused into one chain. */
  disableOperatorChaining(): this {
    this.chainingEnabled = false;
    return this;
  }

  isChainingEnabled(): boolean {
    return this.chainingEnabled;
  }

  /**
   * The exchange mode of all-to-all edges (rebalance, broadcast, keyBy, parallelism changes) that do
   * not choose one. Forward edges between operators that are not chained stay pipelined.
   */
  setDefaultExchange(mode: ExchangeMode): this {
    if (mode !== 'pipelined' && mode !== 'blocking') {
      throw new InvalidJobDefinitionError(`setDefaultExchange(mode) needs 'pipelined' or 'blocking', found ${JSON.stringify(mode)}`);
    }
    this.defaultExchange = mode;
    return this;
  }

  getDefaultExchange(): ExchangeMode {
    return this.defaultExchange;
  }

  /**
   * How this job restarts failed tasks, instead of the cluster's 'restart-strategy.*' options: for
   * instance `{ type: 'fixed-delay', attempts: 3, delayMs: 1000 }`, or `{ type: 'none' }` to fail at the
   * first failure. Fields left out take the cluster's value for that type; the Dispatcher checks the
   * values when the job is submitted and names the option of any that is out of range.
   */
  setRestartStrategy(strategy: RestartStrategySpec): this {
    const types = ['none', 'fixed-delay', 'exponential-delay', 'failure-rate'];
    if (strategy === null || typeof strategy !== 'object' || !types.includes((strategy as { type?: unknown }).type as string)) {
      throw new InvalidJobDefinitionError(
        `setRestartStrategy(strategy) needs { type: ${types.map((t) => `'${t}'`).join(' | ')}, … }, found ${JSON.stringify(strategy)}`,
      );
    }
    for (const [key, value] of Object.entries(strategy)) {
      if (key !== 'type' && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
        throw new InvalidJobDefinitionError(`setRestartStrategy({ ${key} }) needs a finite number >= 0, found ${JSON.stringify(value)}`);
      }
    }
    this.restartStrategy = { ...strategy };
    return this;
  }

  getRestartStrategy(): RestartStrategySpec | undefined {
    return this.restartStrategy;
  }

  /** @internal Records what each slot of `group` needs; one group has one profile. */
  declareGroupProfile(what: string, group: string, profile: unknown): void {
    const p = checkProfile(what, group, profile);
    const known = this.groupProfiles.get(group);
    if (known !== undefined && (known.cpu !== p.cpu || known.memoryMiB !== p.memoryMiB)) {
      throw new InvalidJobDefinitionError(
        `slot sharing group '${group}' is declared with ${JSON.stringify(known)} and with ${JSON.stringify(p)}; a group has one resource profile: give the heavier operators a group of their own`,
      );
    }
    this.groupProfiles.set(group, p);
  }

  /** Slot sharing group → the resource profile of each of its slots, for the groups that declared one. */
  getResourceProfiles(): ReadonlyMap<string, ResourceProfile> {
    return this.groupProfiles;
  }

  /**
   * Records fn(0), fn(1), …, split over the source's subtasks (subtask i makes the indexes i, i + p, …).
   * With `count` the source is bounded; without, it is an unbounded stream that runs until the job is
   * cancelled, and keyed operators after it emit a running update per record.
   */
  generate<T>(fn: GeneratorFunction<T>, options: GenerateOptions = {}): OperatorStream<T> {
    checkFunction('generate', fn);
    const { count, ratePerSecond } = options;
    if (count !== undefined && (!Number.isSafeInteger(count) || count < 0)) {
      throw new InvalidJobDefinitionError(`generate(fn, { count }) needs an integer >= 0, found ${JSON.stringify(count)}`);
    }
    if (ratePerSecond !== undefined && (typeof ratePerSecond !== 'number' || !Number.isFinite(ratePerSecond) || ratePerSecond <= 0)) {
      throw new InvalidJobDefinitionError(`generate(fn, { ratePerSecond }) needs a finite number > 0, found ${JSON.stringify(ratePerSecond)}`);
    }
    return new OperatorStream<T>(this, this.add({ kind: 'source.generate', fn: fn as UserFunction, count, ratePerSecond }, [], false));
  }

  /**
   * Reads a source (Flink's fromSource): a connector's, e.g. `KinesisStreamsSource.builder()…build()`, or a
   * `new DataGeneratorSource(fn, count, RateLimiterStrategy.perSecond(n))`. The records carry the source's
   * event timestamps (a Kinesis record's arrival time); `watermarkStrategy` is applied after the source as
   * assignTimestampsAndWatermarks, with watermarks per split of the source.
   */
  fromSource<T>(source: Source<T>, watermarkStrategy: WatermarkStrategy<T> | undefined, sourceName?: string): OperatorStream<T> {
    const generator = dataGeneratorOf(source);
    const stream =
      generator !== undefined
        ? (this.generate(generator.fn, {
            ...(generator.count !== undefined ? { count: generator.count } : {}),
            ...(generator.ratePerSecond !== undefined ? { ratePerSecond: generator.ratePerSecond } : {}),
          }) as OperatorStream<T>)
        : new OperatorStream<T>(this, this.add({ kind: 'source.connector', ...sourceDescriptorOf(source) }, [], false));
    return withWatermarks(sourceName === undefined ? stream : stream.name(sourceName), watermarkStrategy);
  }

  /** Parallelism of operators that set none; unset means the cluster's `parallelism.default`. */
  setParallelism(parallelism: number): this {
    this.defaultParallelism = checkParallelism('env', parallelism);
    return this;
  }

  getParallelism(): number | undefined {
    return this.defaultParallelism;
  }

  /**
   * The number of key groups of operators that set none (Flink's max parallelism): keyed state is split
   * into this many groups, the most subtasks a keyed operator can be rescaled to. Unset: max(128, the
   * next power of two >= 1.5 × the operator's parallelism), at most 32768.
   */
  setMaxParallelism(maxParallelism: number): this {
    this.defaultMaxParallelism = checkMaxParallelism('env', maxParallelism);
    return this;
  }

  getMaxParallelism(): number | undefined {
    return this.defaultMaxParallelism;
  }

  /** The integers from `from` to `to`, both included, split evenly across the source's subtasks. */
  fromSequence(from: number, to: number): OperatorStream<number> {
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from > to) {
      throw new InvalidJobDefinitionError(
        `fromSequence(from, to) needs safe integers with from <= to, found from=${JSON.stringify(from)}, to=${JSON.stringify(to)}`,
      );
    }
    return new OperatorStream<number>(this, this.add({ kind: 'source.sequence', from, to }, [], false));
  }

  /**
   * The lines of a text file, or of every file in a folder (without their line terminators), read in
   * byte-range splits of `splitSizeBytes` by the source's subtasks; a `.gz` file is read whole,
   * decompressed. A relative path is resolved against the client's working directory when the job is
   * submitted. On the AWS backend, `s3://bucket/key` reads one object and `s3://bucket/prefix` every
   * object under `prefix/`, in key order.
   *
   * With `monitorContinuously: ms` (Flink's FileSource.monitorContinuously), the folder or prefix is listed
   * every `ms` and each new file is read once: the source never ends, the job runs until cancelled. A file
   * is new when its name was not taken before and its time (locally when it got its name, on S3 its
   * LastModified) is at most a minute older than the newest file taken. Names starting with '.' or '_'
   * are skipped: write a file under such a name and rename it when complete (an S3 object is complete
   * when it appears).
   */
  readTextFile(path: string, options: { readonly splitSizeBytes?: number; readonly monitorContinuously?: number } = {}): OperatorStream<string> {
    checkPath('readTextFile', path);
    const split = options.splitSizeBytes;
    if (split !== undefined && (!Number.isSafeInteger(split) || split < 1)) {
      throw new InvalidJobDefinitionError(`readTextFile('${path}', { splitSizeBytes }) needs an integer >= 1, found ${JSON.stringify(split)}`);
    }
    const monitor = options.monitorContinuously;
    if (monitor !== undefined && (!Number.isSafeInteger(monitor) || monitor < 1)) {
      throw new InvalidJobDefinitionError(
        `readTextFile('${path}', { monitorContinuously }) needs the listing interval in ms, an integer >= 1, found ${JSON.stringify(monitor)}`,
      );
    }
    return new OperatorStream<string>(
      this,
      this.add({ kind: 'source.textFile', path, splitSizeBytes: split, ...(monitor !== undefined ? { monitorIntervalMs: monitor } : {}) }, [], false),
    );
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
      maxParallelism: undefined,
      slotSharingGroup: undefined,
      chaining: 'always',
      uid: undefined,
    };
    this.recorded.push(t);
    return t;
  }
}

export class DataStream<T> {
  /** @internal */
  protected readonly env: StreamEnvironment;
  /**
   * @internal What the next operator reads: one input for an operator's output, several after
   * union(); partitioning calls such as rebalance() set the partitioner of each.
   */
  protected readonly inputs: readonly StreamInput[];

  /** @internal Streams are made by StreamEnvironment and DataStream methods, not by user code. */
  constructor(env: StreamEnvironment, inputs: readonly StreamInput[]) {
    this.env = env;
    this.inputs = inputs;
  }

  /** One record per record: a function, or a RichMapFunction (open, close, getRuntimeContext()). */
  map<R>(fn: MapFunction<T, R> | RichMapFunction<T, R>): OperatorStream<R> {
    if (typeof fn === 'object') return this.rich<R>('map', fn);
    return new OperatorStream<R>(this.env, this.env.add({ kind: 'map', fn: checkFunction('map', fn) }, this.inputs, false));
  }

  /** Any number of records per record: a function returning them, or a RichFlatMapFunction collecting them. */
  flatMap<R>(fn: FlatMapFunction<T, R> | RichFlatMapFunction<T, R>): OperatorStream<R> {
    if (typeof fn === 'object') return this.rich<R>('flatMap', fn);
    return new OperatorStream<R>(this.env, this.env.add({ kind: 'flatMap', fn: checkFunction('flatMap', fn) }, this.inputs, false));
  }

  /** The records for which `fn` (a function or a RichFilterFunction) returns true. */
  filter(fn: FilterFunction<T> | RichFilterFunction<T>): OperatorStream<T> {
    if (typeof fn === 'object') return this.rich<T>('filter', fn);
    return new OperatorStream<T>(this.env, this.env.add({ kind: 'filter', fn: checkFunction('filter', fn) }, this.inputs, false));
  }

  /**
   * Calls `fn.processElement(value, ctx, out)` per record (Flink's ProcessFunction): the record's
   * timestamp, the current time, side outputs (ctx.output) and the runtime context; no keyed state or
   * timers (those need keyBy(…).process(KeyedProcessFunction)).
   */
  process<R>(fn: ProcessFunction<T, R>): OperatorStream<R> {
    const spec: TransformationSpec = {
      kind: 'process',
      fn: checkUserObject('process(fn)', fn, 'processElement', 'new MyFunction() of a class extending ProcessFunction'),
    };
    return new OperatorStream<R>(this.env, this.env.add(spec, this.inputs, false));
  }

  private rich<R>(method: 'map' | 'flatMap' | 'filter', fn: unknown): OperatorStream<R> {
    const adapter = new RichFunctionAdapter(
      method,
      checkUserObject(`${method}(fn)`, fn, method, `a function, or an instance of a class extending Rich${method[0]!.toUpperCase()}${method.slice(1)}Function`),
    );
    const t = this.env.add({ kind: 'process', fn: adapter }, this.inputs, false);
    t.name = method;
    return new OperatorStream<R>(this.env, t);
  }

  /**
   * Gives each record its event timestamp (the strategy's timestamp assigner, else the timestamp it has) and
   * makes watermarks with the strategy's generator, emitted every `getConfig().getAutoWatermarkInterval()` ms.
   * Chained right after a source, watermarks are made per split of the source (a file split, a shard, a
   * generator subtask) and combined as the minimum over the splits that are not idle. Upstream watermarks
   * are replaced; at the end of a bounded input the watermark goes to the end of time.
   */
  assignTimestampsAndWatermarks(strategy: WatermarkStrategy<T>): OperatorStream<T> {
    checkWatermarkStrategy(strategy);
    const spec = { kind: 'timestampsAndWatermarks' as const, strategy, watermarkIntervalMs: this.env.getConfig().getAutoWatermarkInterval() };
    return new OperatorStream<T>(this.env, this.env.add(spec, this.inputs, false));
  }

  /** Spreads records round-robin over every subtask of the next operator. */
  rebalance(options?: ExchangeOptions): DataStream<T> {
    return this.partitioned('rebalance', checkExchange('rebalance', options));
  }

  /** Sends every record to every subtask of the next operator. (With MapStateDescriptors: a BroadcastStream, two-input-streams.ts.) */
  broadcast(options?: ExchangeOptions): DataStream<T>;
  broadcast(...args: unknown[]): unknown {
    return this.partitioned('broadcast', checkExchange('broadcast', args[0] as ExchangeOptions | undefined));
  }

  /**
   * Partitions by key: records with equal keys (by value; an object's field order does not matter) go
   * to the same subtask of the keyed operator that follows, which keeps state per key. A key is a
   * string, number, bigint, boolean or null, or an array / plain object of them; anything else fails to
   * compile.
   */
  keyBy<K>(keySelector: KeySelector<T, K & EncodableKey<K>>, options?: ExchangeOptions): KeyedStream<T, K> {
    const key = checkFunction('keyBy', keySelector);
    const exchange = checkExchange('keyBy', options);
    const inputs = this.inputs.map((i): StreamInput => ({
      from: i.from,
      ...(i.sideOutput !== undefined ? { sideOutput: i.sideOutput } : {}),
      partitioner: 'hash',
      keySelector: key,
      ...(exchange !== undefined ? { exchange } : {}),
    }));
    return new KeyedStream<T, K>(this.env, inputs, key);
  }

  /** One stream of this stream's records and the others' (all of the same type), in no particular order. */
  union(...others: DataStream<T>[]): DataStream<T> {
    const inputs = [...this.inputs];
    others.forEach((o, i) => {
      if (!(o instanceof DataStream))
        throw new InvalidJobDefinitionError(`union(...streams) needs DataStreams, argument ${i + 1} is ${o === null ? 'null' : typeof o}`);
      if (o.env !== this.env)
        throw new InvalidJobDefinitionError(
          `union(...streams): argument ${i + 1} belongs to another StreamEnvironment; build every stream of a job on the env its builder receives`,
        );
      inputs.push(...o.inputs);
    });
    return new DataStream<T>(this.env, inputs);
  }

  /**
   * Windows over the whole stream, not per key (Flink's windowAll): one operator subtask (parallelism 1)
   * sees every record. On a keyed stream, keyBy(…).window(assigner) windows per key in parallel.
   */
  windowAll(assigner: WindowAssigner<T>): AllWindowedStream<T> {
    const settings = windowSettings('windowAll(assigner)', () => 0, assigner, true);
    return new AllWindowedStream<T>(
      this.env,
      this.inputs.map((i): StreamInput => ({ from: i.from, partitioner: 'hash', keySelector: settings.key })),
      settings,
    );
  }

  /**
   * Writes each record's text (strings as they are, other values as JSON) as one line. On bounded input
   * the sink writes part files that appear at `path` (a folder, one file per subtask) only when the job
   * finishes; on unbounded input it rolls part files `part-<subtask>-<n>` into `path` as the job runs
   * (FileSink's default rolling policy), each visible once complete.
   * A relative path is resolved against the client's working directory. An existing target is
   * refused at submission unless `{ writeMode: 'overwrite' }` and it holds only an earlier Floe output.
   */
  writeAsText(path: string, options: WriteAsTextOptions = {}): DataStreamSink {
    checkPath('writeAsText', path);
    const writeMode = options.writeMode;
    if (writeMode !== undefined && !WRITE_MODES.includes(writeMode)) {
      throw new InvalidJobDefinitionError(
        `writeAsText('${path}', { writeMode }) needs one of ${WRITE_MODES.map((m) => `'${m}'`).join(', ')}, found ${JSON.stringify(writeMode)}`,
      );
    }
    return new DataStreamSink(this.env, this.env.add({ kind: 'sink.textFile', path, writeMode }, this.inputs, false));
  }

  /**
   * Writes the records to a FileSink (FileSink.forRowFormat(path, encoder?)…build()). On an unbounded
   * stream its part files roll into `path` as the job runs, each visible once complete; on a bounded
   * stream it writes as writeAsText does. Or writes them with a connector's sink, e.g.
   * `KinesisStreamsSink.builder()…build()`.
   */
  sinkTo(sink: FileSink<T> | Sink<T>): DataStreamSink {
    if (isConnectorSink(sink)) return new DataStreamSink(this.env, this.env.add(connectorSinkSpec(sink), this.inputs, false));
    // Read by its fields: the job's library and the client may hold different copies of this API.
    const s = sink as Partial<FileSink<T>> | null;
    if (s === null || typeof s !== 'object' || typeof s.path !== 'string' || typeof s.rolling !== 'object') {
      throw new InvalidJobDefinitionError(
        `sinkTo(sink) needs a FileSink (FileSink.forRowFormat(path).build()) or a connector's sink (e.g. KinesisStreamsSink.builder()…build()), found ${sink === null ? 'null' : typeof sink}`,
      );
    }
    const file = sink as FileSink<T>;
    const spec = { kind: 'sink.textFile', path: file.path, writeMode: undefined, rolling: file.rolling } as const;
    const t = this.env.add(file.encode === undefined ? spec : { ...spec, encoder: file.encode as UserFunction }, this.inputs, false);
    t.name = 'FileSink';
    return new DataStreamSink(this.env, t);
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
    return new DataStreamSink(this.env, this.env.add({ kind: 'sink.collect', maxRecords: max }, this.inputs, false));
  }

  private partitioned(partitioner: Partitioner, exchange: ExchangeMode | undefined): DataStream<T> {
    return new DataStream<T>(
      this.env,
      this.inputs.map((i): StreamInput => ({
        from: i.from,
        ...(i.sideOutput !== undefined ? { sideOutput: i.sideOutput } : {}),
        partitioner,
        ...(exchange !== undefined ? { exchange } : {}),
      })),
    );
  }
}

/**
 * A stream partitioned by key (keyBy). Its operators keep state per key: on bounded input (every
 * source upstream ends: readTextFile, fromCollection, fromSequence, generate with a count) they emit
 * one final value per key at end of input; on unbounded input, the key's new value after every record.
 */
export class KeyedStream<T, K> {
  /** @internal */
  constructor(
    private readonly env: StreamEnvironment,
    private readonly inputs: readonly StreamInput[],
    private readonly key: UserFunction,
  ) {}

  /**
   * Folds each key's records with `fn(accumulated, value)`; a key's first record is its start value. On
   * bounded input the producers reduce their records per key before the exchange and the keyed operator
   * reduces those partial values, so `fn` must be associative (as a sum or a max is); the order in which
   * records of different producers meet was never fixed.
   */
  reduce(fn: ReduceFunction<T>): OperatorStream<T> {
    return this.keyed({ kind: 'keyed.reduce', key: this.key, fn: checkFunction('reduce', fn) });
  }

  /** Numbers: the sum per key. */
  sum(this: KeyedStream<number, K>): OperatorStream<number>;
  /** Objects or tuples: the key's first record with `field` (a property name or tuple index of a number) holding the sum. */
  sum(field: NumericField<T>): OperatorStream<T>;
  /** What `selector` returns for each record, summed per key: emits [key, sum]. */
  sum(selector: (value: T) => number): OperatorStream<[K, number]>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves every overload above, each with its own element type
  sum(fieldOrSelector?: string | number | ((value: T) => number)): OperatorStream<any> {
    if (typeof fieldOrSelector === 'function') {
      return this.keyed({ kind: 'keyed.sum', key: this.key, field: undefined, selector: fieldOrSelector as UserFunction });
    }
    return this.keyed({ kind: 'keyed.sum', key: this.key, field: checkField('sum', fieldOrSelector, true, ' or a selector function'), selector: undefined });
  }

  /** Numbers: the smallest per key. */
  min(this: KeyedStream<number, K>): OperatorStream<number>;
  /**
   * Objects or tuples: the key's first record with `field` (a property name or tuple index of a number,
   * bigint or string) holding the smallest value of that field, as Flink's min. minBy gives the record
   * holding it.
   */
  min(field: ComparableField<T>): OperatorStream<T>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves every overload above, each with its own element type
  min(field?: ComparableField<T>): OperatorStream<any> {
    return this.extremum('keyed.min', field);
  }

  /** Numbers: the largest per key. */
  max(this: KeyedStream<number, K>): OperatorStream<number>;
  /** As min(field), with the largest value. */
  max(field: ComparableField<T>): OperatorStream<T>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves every overload above, each with its own element type
  max(field?: ComparableField<T>): OperatorStream<any> {
    return this.extremum('keyed.max', field);
  }

  /**
   * The record of each key whose `field` (a property name or tuple index of a number, bigint or string)
   * holds the smallest value; of several such records, the first.
   */
  minBy(field: ComparableField<T>): OperatorStream<T> {
    return this.extremum('keyed.minBy', checkField('minBy', field, false));
  }

  /** As minBy, with the largest value. */
  maxBy(field: ComparableField<T>): OperatorStream<T> {
    return this.extremum('keyed.maxBy', checkField('maxBy', field, false));
  }

  /**
   * Folds each key's records into an accumulator (createAccumulator, add) and emits getResult of it. With
   * `merge`, bounded input is pre-aggregated per key by the producers before the exchange.
   */
  aggregate<A, R>(fn: AggregateFunction<T, A, R>): OperatorStream<R> {
    if (fn === null || typeof fn !== 'object') {
      throw new InvalidJobDefinitionError(`aggregate(fn) needs an object with createAccumulator, add and getResult, found ${fn === null ? 'null' : typeof fn}`);
    }
    // Bound, so an aggregate written as a class keeps its `this`.
    const method = (name: 'createAccumulator' | 'add' | 'getResult' | 'merge'): UserFunction =>
      checkFunction(`aggregate({ ${name} })`, fn[name]).bind(fn) as UserFunction;
    return this.keyed({
      kind: 'keyed.aggregate',
      key: this.key,
      createAccumulator: method('createAccumulator'),
      add: method('add'),
      getResult: method('getResult'),
      merge: fn.merge === undefined ? undefined : method('merge'),
    });
  }

  /**
   * Calls `fn.processElement(value, ctx, out)` per record with the state and timers of the record's key
   * (Flink's KeyedProcessFunction): keyed state through getRuntimeContext(), event- and processing-time
   * timers through ctx.timerService(), fired into `fn.onTimer(timestamp, ctx, out)`.
   */
  process<R>(fn: KeyedProcessFunction<K, T, R>): OperatorStream<R> {
    const object = checkUserObject('process(fn)', fn, 'processElement', 'new MyFunction() of a class extending KeyedProcessFunction');
    return this.keyed({ kind: 'keyed.process', key: this.key, fn: object });
  }

  /**
   * Groups each key's records into windows (Flink's keyBy(…).window): TumblingEventTimeWindows.of(size),
   * SlidingEventTimeWindows.of(size, slide), EventTimeSessionWindows.withGap(gap) or their processing-time
   * twins; then reduce, aggregate or process the windows.
   */
  window(assigner: WindowAssigner<T>): WindowedStream<T, K> {
    return new WindowedStream<T, K>(this.env, this.inputs, windowSettings('window(assigner)', this.key, assigner, false));
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- serves sum/min/max, whose overloads each name their own element type
  private extremum(kind: ExtremumKind, field: unknown): OperatorStream<any> {
    return this.keyed({ kind, key: this.key, field: checkField(DEFAULT_NAMES[kind], field, true) });
  }

  private keyed<R>(spec: TransformationSpec): OperatorStream<R> {
    return new OperatorStream<R>(this.env, this.env.add(spec, this.inputs, false));
  }
}

function windowSettings(call: string, key: UserFunction, assigner: unknown, all: boolean): WindowSettings {
  return { key, window: windowSpecOf(call, assigner), trigger: undefined, allowedLateness: 0, lateDataTag: undefined, all };
}

/** @internal What windowed streams share: their settings, and the operator they make. */
export abstract class WindowedStreamBase<T> {
  /** @internal */
  constructor(
    protected readonly env: StreamEnvironment,
    protected readonly inputs: readonly StreamInput[],
    protected settings: WindowSettings,
  ) {}

  /**
   * Keeps each window's state `ms` past its end: a late element within that time fires the window again
   * with it; later ones are dropped (or sent to sideOutputLateData's tag). @default 0
   */
  allowedLateness(ms: number): this {
    this.settings = { ...this.settings, allowedLateness: checkLateness(ms) };
    return this;
  }

  /** Sends elements too late for every window they belong to (past end + allowed lateness) to the side output `tag`. */
  sideOutputLateData(tag: SideOutputTag<T>): this {
    this.settings = { ...this.settings, lateDataTag: lateDataTagOf(this.settings, tag) };
    return this;
  }

  /** When windows fire: EventTimeTrigger (event-time default), ProcessingTimeTrigger (processing-time default), CountTrigger.of(n). */
  trigger(trigger: Trigger): this {
    this.settings = { ...this.settings, trigger: triggerSpecOf(trigger) };
    return this;
  }

  /** @internal */
  protected operator<R>(spec: TransformationSpec): OperatorStream<R> {
    const t = this.env.add(spec, this.inputs, this.settings.all);
    if (this.settings.all) {
      t.parallelism = 1;
      t.name = 'windowAll';
    }
    return new OperatorStream<R>(this.env, t);
  }
}

/**
 * The windows of a keyed stream (Flink's WindowedStream). A window fires when the watermark passes its end
 * (processing-time windows: when the clock does); what it emits carries the window's maxTimestamp().
 */
export class WindowedStream<T, K> extends WindowedStreamBase<T> {
  /** Folds each window's records with `fn` as they come (one value kept per window pane). */
  reduce(fn: ReduceFunction<T>): OperatorStream<T>;
  /** Folds with `fn`, then hands the window's one result to `windowFunction` with the key and window. */
  reduce<R>(fn: ReduceFunction<T>, windowFunction: ProcessWindowFunction<T, R, K, TimeWindow>): OperatorStream<R>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves both overloads, each with its own element type
  reduce(fn: ReduceFunction<T>, windowFunction?: unknown): OperatorStream<any> {
    return this.operator(reduceWindowSpec(this.settings, fn, windowFunction));
  }

  /** Folds each window's records into an accumulator as they come; emits getResult of it. */
  aggregate<A, R>(fn: AggregateFunction<T, A, R>): OperatorStream<R>;
  /** Aggregates, then hands the window's one result to `windowFunction` with the key and window. */
  aggregate<A, V, R>(fn: AggregateFunction<T, A, V>, windowFunction: ProcessWindowFunction<V, R, K, TimeWindow>): OperatorStream<R>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves both overloads, each with its own element type
  aggregate(fn: AggregateFunction<T, unknown, unknown>, windowFunction?: unknown): OperatorStream<any> {
    return this.operator(aggregateWindowSpec(this.settings, fn, windowFunction));
  }

  /** Hands each window's records (kept until it fires) to `windowFunction` with the key and window. */
  process<R>(windowFunction: ProcessWindowFunction<T, R, K, TimeWindow>): OperatorStream<R> {
    return this.operator(processWindowSpec(this.settings, windowFunction));
  }
}

/** The windows of a whole stream (Flink's AllWindowedStream, from windowAll): one subtask, no key. */
export class AllWindowedStream<T> extends WindowedStreamBase<T> {
  reduce(fn: ReduceFunction<T>): OperatorStream<T>;
  reduce<R>(fn: ReduceFunction<T>, windowFunction: ProcessAllWindowFunction<T, R, TimeWindow>): OperatorStream<R>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves both overloads, each with its own element type
  reduce(fn: ReduceFunction<T>, windowFunction?: unknown): OperatorStream<any> {
    return this.operator(reduceWindowSpec(this.settings, fn, windowFunction));
  }

  aggregate<A, R>(fn: AggregateFunction<T, A, R>): OperatorStream<R>;
  aggregate<A, V, R>(fn: AggregateFunction<T, A, V>, windowFunction: ProcessAllWindowFunction<V, R, TimeWindow>): OperatorStream<R>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one body serves both overloads, each with its own element type
  aggregate(fn: AggregateFunction<T, unknown, unknown>, windowFunction?: unknown): OperatorStream<any> {
    return this.operator(aggregateWindowSpec(this.settings, fn, windowFunction));
  }

  process<R>(windowFunction: ProcessAllWindowFunction<T, R, TimeWindow>): OperatorStream<R> {
    return this.operator(processWindowSpec(this.settings, windowFunction));
  }
}

/** A stream produced by one operator: its name, parallelism, slot sharing group and chaining can be set. */
export class OperatorStream<T> extends DataStream<T> {
  /** @internal */
  protected readonly transformation: Transformation;

  /** @internal */
  constructor(env: StreamEnvironment, transformation: Transformation) {
    super(env, [{ from: transformation }]);
    this.transformation = transformation;
  }

  name(name: string): this {
    this.transformation.name = checkName(`'${this.transformation.name}'`, name);
    return this;
  }

  /**
   * The operator's stable id (Flink's uid), unique in the job: checkpoints and savepoints store its state
   * under it, so a changed job (other operators added, chains split) restores it. Set it on every stateful
   * operator of a job that checkpoints.
   */
  uid(uid: string): this {
    this.env.assignUid(this.transformation, uid);
    return this;
  }

  setParallelism(parallelism: number): this {
    setOperatorParallelism(this.transformation, parallelism);
    return this;
  }

  /** The number of key groups of this operator's keyed state (see StreamEnvironment.setMaxParallelism). */
  setMaxParallelism(maxParallelism: number): this {
    this.transformation.maxParallelism = checkMaxParallelism(`'${this.transformation.name}'`, maxParallelism);
    return this;
  }

  /**
   * Operators of one group may share slots (one subtask of each per slot); a different group gets
   * slots of its own. Unset, an operator takes its inputs' group, or 'default'. With a `profile`, each
   * slot of the group gets that many vCPUs and that much memory: the group runs on TaskExecutors started
   * for it, of 'taskmanager.numberOfTaskSlots' such slots each. A group has one profile.
   */
  slotSharingGroup(group: string, profile?: ResourceProfile): this {
    const what = `'${this.transformation.name}'`;
    this.transformation.slotSharingGroup = checkGroup(what, group);
    if (profile !== undefined) this.env.declareGroupProfile(what, group, profile);
    return this;
  }

  /** Starts a new chain at this operator: it is not fused with its input, but later operators may join it. */
  startNewChain(): this {
    if (this.transformation.chaining !== 'never') this.transformation.chaining = 'head';
    return this;
  }

  /** Fuses this operator with neither its input nor its consumers: it runs in a task of its own. */
  disableChaining(): this {
    this.transformation.chaining = 'never';
    return this;
  }

  /** The operator's id, the same on every run of the builder with the same arguments. */
  getId(): string {
    return this.transformation.id;
  }

  /** The records this operator emits to the side output `tag` (ctx.output(tag, value), late window data…). */
  getSideOutput<X>(tag: OutputTag<X>): DataStream<X> {
    const id = outputTagId(tag, `getSideOutput(tag) of '${this.transformation.name}'`);
    return new DataStream<X>(this.env, [{ from: this.transformation, sideOutput: id }]);
  }
}

/** The end of a stream. */
export class DataStreamSink {
  /** @internal */
  private readonly transformation: Transformation;
  /** @internal */
  private readonly env: StreamEnvironment;

  /** @internal */
  constructor(env: StreamEnvironment, transformation: Transformation) {
    this.env = env;
    this.transformation = transformation;
  }

  name(name: string): this {
    this.transformation.name = checkName(`'${this.transformation.name}'`, name);
    return this;
  }

  /**
   * The operator's stable id (Flink's uid), unique in the job: checkpoints and savepoints store its state
   * under it, so a changed job (other operators added, chains split) restores it. Set it on every stateful
   * operator of a job that checkpoints.
   */
  uid(uid: string): this {
    this.env.assignUid(this.transformation, uid);
    return this;
  }

  setParallelism(parallelism: number): this {
    setOperatorParallelism(this.transformation, parallelism);
    return this;
  }

  /** As OperatorStream.slotSharingGroup. */
  slotSharingGroup(group: string, profile?: ResourceProfile): this {
    const what = `'${this.transformation.name}'`;
    this.transformation.slotSharingGroup = checkGroup(what, group);
    if (profile !== undefined) this.env.declareGroupProfile(what, group, profile);
    return this;
  }

  /** Keeps the sink out of its input's chain (it runs in a task of its own). */
  disableChaining(): this {
    this.transformation.chaining = 'never';
    return this;
  }

  getId(): string {
    return this.transformation.id;
  }
}
