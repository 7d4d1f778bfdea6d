// The JobGraph: what a client submits. Vertices run a chain of operators taken from the job's
// library; edges say how records travel between them.
import type { JobId } from '../core/ids.js';
import type { ResourceProfile } from '../core/resource-profile.js';
import type { CheckpointingSettings } from './checkpointing.js';
import type { WindowAssignerSpec, WindowFunctionKind, WindowTriggerSpec } from './window-spec.js';
import { twoInputFunctionRefs, type TwoInputOperatorSpec } from './two-input-operator-specs.js';

export const DistributionPattern = { FORWARD: 'forward', ALL_TO_ALL: 'all-to-all' } as const;
export type DistributionPattern = (typeof DistributionPattern)[keyof typeof DistributionPattern];

export const PartitionType = { PIPELINED: 'pipelined', BLOCKING: 'blocking' } as const;
export type PartitionType = (typeof PartitionType)[keyof typeof PartitionType];

/** How a producer subtask picks the consumer subtask(s) of a record. */
export const Partitioner = { FORWARD: 'forward', REBALANCE: 'rebalance', HASH: 'hash', BROADCAST: 'broadcast' } as const;
export type Partitioner = (typeof Partitioner)[keyof typeof Partitioner];

/** A user function: operator `operatorId` of the job program exported as `export` by the library. */
export interface FunctionRef {
  readonly export: string;
  readonly operatorId: string;
  /**
   * Which of the operator's functions, when it has several (a keyed operator's 'key' selector, an
   * aggregate's 'add', …). Absent: the operator's one function.
   */
  readonly role?: string;
}

/**
 * What a text sink may do to an existing target, as Flink's FileSystem.WriteMode: 'no-overwrite' writes
 * only a new or empty folder; 'overwrite' also replaces an earlier Floe output (a folder whose _SUCCESS
 * manifest lists its part files), never anything Floe did not write.
 */
export const WriteMode = { NO_OVERWRITE: 'no-overwrite', OVERWRITE: 'overwrite' } as const;
export type WriteMode = (typeof WriteMode)[keyof typeof WriteMode];

/**
 * When a streaming file sink rolls its in-progress part file (Flink's DefaultRollingPolicy): once it is
 * `maxPartSizeBytes` long, `rolloverIntervalMs` after it was opened, or after `inactivityIntervalMs`
 * without a record. The time conditions are checked every `checkIntervalMs` (Flink's bucket check interval).
 */
export interface RollingPolicySpec {
  readonly rolloverIntervalMs: number;
  readonly inactivityIntervalMs: number;
  readonly maxPartSizeBytes: number;
  readonly checkIntervalMs: number;
}

/** Flink's defaults: 60 s rollover, 60 s inactivity, 128 MiB parts, checked every 60 s. */
export const DEFAULT_ROLLING_POLICY: RollingPolicySpec = {
  rolloverIntervalMs: 60_000,
  inactivityIntervalMs: 60_000,
  maxPartSizeBytes: 128 * 1024 * 1024,
  checkIntervalMs: 60_000,
};

/** When a keyed operator emits: one final value per key at end of input (bounded), or an update per record. */
export const KeyedEmit = { FINAL: 'final', UPDATES: 'updates' } as const;
export type KeyedEmit = (typeof KeyedEmit)[keyof typeof KeyedEmit];

/** What every operator may carry, whatever its kind. */
export interface OperatorCommon {
  /**
   * The user's stable id of the operator (`uid(…)`), unique in the job: its state in a checkpoint or
   * savepoint is stored under it, so a changed job finds it again. Absent: the operator's state is stored
   * under `<vertex id>:<index in the chain>`.
   */
  readonly uid?: string;
}

/**
 * One operator of a vertex's chain. Built-in sources and sinks carry their parameters; user
 * operators name their function in the library.
 */
export type OperatorSpec = OperatorCommon & OperatorOfKind;

/** The fields of an operator of each kind. */
type OperatorOfKind =
  | { readonly kind: 'source.sequence'; readonly id: string; readonly name: string; readonly from: number; readonly to: number }
  /**
   * Lines of a file or folder; with `monitorIntervalMs` the folder (prefix) is listed every that many ms
   * and each new file is read once, without end (Flink's FileSource.monitorContinuously).
   */
  | {
      readonly kind: 'source.textFile';
      readonly id: string;
      readonly name: string;
      readonly path: string;
      readonly splitSizeBytes: number;
      readonly monitorIntervalMs?: number;
    }
  /**
   * A source of a registered connector (Flink's `fromSource`): the JobMaster's SplitEnumerator and the
   * tasks' SourceReader registered under `connector` read it, configured by `config` (plain JSON data).
   */
  | {
      readonly kind: 'source.connector';
      readonly id: string;
      readonly name: string;
      readonly connector: string;
      readonly config: Readonly<Record<string, unknown>>;
      readonly bounded: boolean;
    }
  | { readonly kind: 'source.collection'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  /** Records fn(0), fn(1), …: `count` of them (bounded) or without end; at most `ratePerSecond` over all subtasks. */
  | {
      readonly kind: 'source.generate';
      readonly id: string;
      readonly name: string;
      readonly fn: FunctionRef;
      readonly count?: number;
      readonly ratePerSecond?: number;
    }
  | { readonly kind: 'map'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'flatMap'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'filter'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  /** A ProcessFunction: `fn` names the user's object (processElement, open, close), called per record. */
  | { readonly kind: 'process'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  /**
   * A KeyedProcessFunction: `fn` names the user's object (processElement, onTimer, open, close), called
   * with the keyed state and timers of the record's key. Heads its chain, fed by hash edges keyed by `key`.
   */
  | { readonly kind: 'keyed.process'; readonly id: string; readonly name: string; readonly key: FunctionRef; readonly fn: FunctionRef }
  /**
   * Gives records event timestamps and makes watermarks (assignTimestampsAndWatermarks): `strategy` is the
   * user's WatermarkStrategy; periodic watermarks every `watermarkIntervalMs` (pipeline.auto-watermark-interval).
   */
  | {
      readonly kind: 'timestampsAndWatermarks';
      readonly id: string;
      readonly name: string;
      readonly strategy: FunctionRef;
      readonly watermarkIntervalMs: number;
    }
  /**
   * `writeMode` @default 'no-overwrite' (graphs built by the job API always carry it). With `rolling`
   * (a sink on an unbounded stream) the sink rolls part files into the target while the job runs; without,
   * each subtask stages one part that the JobMaster commits when the job finishes. `encoder` turns a
   * record into its line (default: strings as they are, other values as JSON).
   */
  | {
      readonly kind: 'sink.textFile';
      readonly id: string;
      readonly name: string;
      readonly path: string;
      readonly writeMode?: WriteMode;
      readonly rolling?: RollingPolicySpec;
      readonly encoder?: FunctionRef;
    }
  | { readonly kind: 'sink.collect'; readonly id: string; readonly name: string; readonly maxRecords: number }
  /**
   * A sink of a registered connector (Flink's `sinkTo`): the sink writer the tasks registered under
   * `connector` writes each record, configured by `config` (plain JSON data) and the user functions
   * `fns` (each with its role, e.g. 'serialize', 'partitionKey').
   */
  | {
      readonly kind: 'sink.connector';
      readonly id: string;
      readonly name: string;
      readonly connector: string;
      readonly config: Readonly<Record<string, unknown>>;
      readonly fns: readonly FunctionRef[];
    }
  /**
   * Keyed operators head their chain and read hash edges whose keySelector is their `key`. With
   * `preAggregate` (emit 'final' only) the producers of those edges fold their records per key before
   * the exchange and send `[key, partial]` pairs, which the keyed operator merges.
   */
  | {
      readonly kind: 'keyed.reduce';
      readonly id: string;
      readonly name: string;
      readonly key: FunctionRef;
      readonly fn: FunctionRef;
      readonly emit: KeyedEmit;
      readonly preAggregate?: boolean;
    }
  /**
   * Sums per key: the records themselves (numbers), a `field` of each record (the result is the key's
   * first record with that field holding the sum), or what `selector` returns (the result is [key, sum]).
   */
  | {
      readonly kind: 'keyed.sum';
      readonly id: string;
      readonly name: string;
      readonly key: FunctionRef;
      readonly field?: string | number;
      readonly selector?: FunctionRef;
      readonly emit: KeyedEmit;
      readonly preAggregate?: boolean;
    }
  | {
      readonly kind: 'keyed.aggregate';
      readonly id: string;
      readonly name: string;
      readonly key: FunctionRef;
      readonly createAccumulator: FunctionRef;
      readonly add: FunctionRef;
      readonly getResult: FunctionRef;
      /** Merges two accumulators; without it the operator cannot take pre-aggregated input. */
      readonly merge?: FunctionRef;
      readonly emit: KeyedEmit;
      readonly preAggregate?: boolean;
    }
  /**
   * As Flink's min / max / minBy / maxBy: per key, the extreme of the records themselves (numbers, no
   * `field`) or of a `field` of each record. min and max give the key's first record with the field
   * holding the extreme; minBy and maxBy the record holding it (the first such record on a tie).
   */
  | {
      readonly kind: ExtremumKind;
      readonly id: string;
      readonly name: string;
      readonly key: FunctionRef;
      readonly field?: string | number;
      readonly emit: KeyedEmit;
      readonly preAggregate?: boolean;
    }
  /**
   * A window operator: per key (windowAll: one constant key, parallelism 1) the windows of `window`,
   * fired by `trigger`, kept `allowedLateness` ms past their end; elements later than that go to the side
   * output `lateDataTag`, or are dropped. `windowFunction` says which functions it names: `reduce`; or
   * createAccumulator, add, getResult and optionally merge; or only `process`. After reduce or aggregate,
   * `process` (a ProcessWindowFunction) is optional. With `preAggregate` (event-time tumbling or sliding
   * windows, their event-time trigger, no allowed lateness and no late-data output, a reduce or an
   * aggregate with merge) the producers fold their records per key and pane before the exchange and send
   * `[key, partial]` pairs stamped with the pane's last millisecond, each pane's when their watermark
   * passes it; the window operator merges them.
   */
  | {
      readonly kind: 'keyed.window';
      readonly id: string;
      readonly name: string;
      readonly key: FunctionRef;
      readonly window: WindowAssignerSpec;
      readonly trigger: WindowTriggerSpec;
      readonly allowedLateness: number;
      readonly lateDataTag?: string;
      readonly windowFunction: WindowFunctionKind;
      readonly reduce?: FunctionRef;
      readonly createAccumulator?: FunctionRef;
      readonly add?: FunctionRef;
      readonly getResult?: FunctionRef;
      readonly merge?: FunctionRef;
      readonly process?: FunctionRef;
      readonly preAggregate?: boolean;
    }
  | TwoInputOperatorSpec<FunctionRef>;
export type OperatorKind = OperatorSpec['kind'];
export type ExtremumKind = 'keyed.min' | 'keyed.max' | 'keyed.minBy' | 'keyed.maxBy';

export interface JobVertex {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly maxParallelism: number;
  readonly slotSharingGroup: string;
  /** The operator chain, first operator first. A source vertex starts with a source operator. */
  readonly operators: readonly OperatorSpec[];
  /**
   * A chain that branches (one operator feeding several chained ones, as Flink chains a fan-out): for each
   * operator, the index of the chained operator whose records it reads (-1 for the first). Absent: each
   * operator reads the one before it. A branching chain holds no sink.
   */
  readonly chainInputs?: readonly number[];
}

export interface JobEdge {
  readonly id: string;
  readonly source: string;
  readonly target: string;
  readonly distribution: DistributionPattern;
  readonly partitioner: Partitioner;
  readonly partitionType: PartitionType;
  /** On hash edges: the producer applies it to route each record; the keyed consumer applies it again. */
  readonly keySelector?: FunctionRef;
  /** The edge carries the source's side output with this OutputTag id instead of its main output. */
  readonly sideOutputTag?: string;
  /** Which input of a two-input target the edge feeds: 0 (the first, also of one-input targets) or 1. @default 0 */
  readonly targetInput?: number;
  /** In a branching chain: the index of the source vertex's operator whose output the edge carries. @default - the last operator */
  readonly sourceOperator?: number;
}

/**
 * A job's own restart strategy (Flink's `restart-strategy.*` options, per job). Fields left out take the
 * cluster's value for that strategy type; times are in milliseconds.
 */
export type RestartStrategySpec =
  | { readonly type: 'none' }
  | { readonly type: 'fixed-delay'; readonly attempts?: number; readonly delayMs?: number }
  | {
      readonly type: 'exponential-delay';
      readonly initialBackoffMs?: number;
      readonly maxBackoffMs?: number;
      readonly backoffMultiplier?: number;
      readonly jitterFactor?: number;
      readonly resetBackoffThresholdMs?: number;
      readonly attemptsBeforeResetBackoff?: number;
    }
  | { readonly type: 'failure-rate'; readonly maxFailuresPerInterval?: number; readonly failureRateIntervalMs?: number; readonly delayMs?: number };
export type RestartStrategyType = RestartStrategySpec['type'];
export const RESTART_STRATEGY_TYPES: readonly RestartStrategyType[] = ['none', 'fixed-delay', 'exponential-delay', 'failure-rate'];

/** The profile of one slot of `group`, undefined for the default. */
export const profileOfGroup = (graph: Pick<JobGraph, 'resourceProfiles'>, group: string): ResourceProfile | undefined =>
  graph.resourceProfiles !== undefined && Object.hasOwn(graph.resourceProfiles, group) ? graph.resourceProfiles[group] : undefined;

/**
 * How a task makes the job's user functions: it runs the builder exported as `export` with `args`,
 * answering its reads of the environment, files, the clock and random numbers from `builderReads`
 * (what the builder read on the client), and checks that the plan it made has `planFingerprint`.
 */
export interface JobProgram {
  readonly export: string;
  readonly args: readonly string[];
  /** What the builder read on the client: read (`env:NAME`, `Math.random`, …) → the values it got, in order. */
  readonly builderReads?: Readonly<Record<string, readonly unknown[]>>;
  /** A hash of the operators the builder made (ids, kinds, function sources, partitioners). */
  readonly planFingerprint?: string;
}

export interface JobGraph {
  readonly jobId: JobId;
  readonly name: string;
  /** The user-code library this job runs, content-addressed. */
  readonly library: { readonly sha256: string; readonly sizeBytes: number };
  /** The library export whose builder defines the job, the arguments it was built with, and what it read. */
  readonly program: JobProgram;
  readonly vertices: readonly JobVertex[];
  readonly edges: readonly JobEdge[];
  /** The job's restart strategy; absent: the cluster's (`restart-strategy.type` and its options). */
  readonly restartStrategy?: RestartStrategySpec;
  /** Slot sharing group → what each of its slots needs; a group not named here takes default slots. */
  readonly resourceProfiles?: Readonly<Record<string, ResourceProfile>>;
  /** The job's checkpointing (env.enableCheckpointing); absent: the cluster's ('execution.checkpointing.interval', off by default). */
  readonly checkpointing?: CheckpointingSettings;
  /** env.getConfig().enableObjectReuse(): a chain's branches share one record object. @default false - each branch but the last gets a copy */
  readonly objectReuse?: boolean;
  /**
   * `floe run --from-savepoint <path> [--allow-non-restored-state]`: with no completed checkpoint of the job,
   * its first deployment restores from this savepoint (`path`: the savepoint's folder or its `_metadata` URI).
   * `allowNonRestoredState`: state of operators the job no longer has is skipped instead of failing the job.
   */
  readonly savepointRestore?: SavepointRestoreSettings;
}

/** Where a job's first deployment takes its state from (Flink's SavepointRestoreSettings). */
export interface SavepointRestoreSettings {
  readonly path: string;
  readonly allowNonRestoredState: boolean;
}

export const isSourceOperator = (op: OperatorSpec): boolean => op.kind.startsWith('source.');
export const isSinkOperator = (op: OperatorSpec): boolean => op.kind.startsWith('sink.');
export const isKeyedOperator = (op: OperatorSpec): boolean => op.kind.startsWith('keyed.');

/** A text sink's write mode, its default filled in. */
export const writeModeOf = (op: Extract<OperatorSpec, { kind: 'sink.textFile' }>): WriteMode => op.writeMode ?? WriteMode.NO_OVERWRITE;

/** Every user function an operator names, in a fixed order. */
export function functionRefsOf(op: OperatorSpec): FunctionRef[] {
  switch (op.kind) {
    case 'source.collection':
    case 'source.generate':
    case 'map':
    case 'flatMap':
    case 'filter':
    case 'process':
      return [op.fn];
    case 'keyed.process':
      return [op.key, op.fn];
    case 'timestampsAndWatermarks':
      return [op.strategy];
    case 'keyed.reduce':
      return [op.key, op.fn];
    case 'keyed.sum':
      return op.selector === undefined ? [op.key] : [op.key, op.selector];
    case 'keyed.min':
    case 'keyed.max':
    case 'keyed.minBy':
    case 'keyed.maxBy':
      return [op.key];
    case 'keyed.aggregate':
      return op.merge === undefined ? [op.key, op.createAccumulator, op.add, op.getResult] : [op.key, op.createAccumulator, op.add, op.getResult, op.merge];
    case 'sink.connector':
      return [...op.fns];
    case 'sink.textFile':
      return op.encoder === undefined ? [] : [op.encoder];
    case 'keyed.window':
      return [op.key, op.reduce, op.createAccumulator, op.add, op.getResult, op.merge, op.process].filter((r): r is FunctionRef => r !== undefined);
    case 'source.sequence':
    case 'source.textFile':
    case 'source.connector':
    case 'sink.collect':
      return [];
    case 'co.map':
    case 'co.flatMap':
    case 'co.process':
    case 'keyed.coProcess':
    case 'keyed.intervalJoin':
    case 'keyed.windowJoin':
    case 'broadcast.process':
    case 'keyed.broadcastProcess':
      return twoInputFunctionRefs(op);
    default:
      return op satisfies never;
  }
}

/** The key a FunctionRef is found under in the map of user functions a task resolves. */
export const functionKey = (ref: Pick<FunctionRef, 'operatorId' | 'role'>): string =>
  ref.role === undefined ? ref.operatorId : `${ref.operatorId}.${ref.role}`;
