// What a StreamEnvironment records (Flink's Transformation): one entry per operator, with its inputs,
// how records reach it, and the settings the user gave it. translate.ts turns them into a JobGraph.
import type { ExtremumKind, OperatorKind, Partitioner, RollingPolicySpec, WriteMode } from '../jobgraph/jobgraph.js';
import type { WindowAssignerSpec, WindowFunctionKind, WindowTriggerSpec } from '../jobgraph/window-spec.js';
import type { UserFunction } from './functions.js';
import { TWO_INPUT_DEFAULT_NAMES, type TwoInputTransformationSpec } from './two-input-transformations.js';

/**
 * How records cross an all-to-all edge: 'pipelined' streams them to a running consumer (backpressure,
 * bounded memory); 'blocking' writes them to disk and the consumer starts once the producer is done.
 */
export type ExchangeMode = 'pipelined' | 'blocking';
export interface ExchangeOptions {
  /** @default - the environment's default exchange (setDefaultExchange), itself 'pipelined' by default */
  readonly exchange?: ExchangeMode;
}

/** What a transformation does, with the parameters of its operator. */
export type TransformationSpec =
  | { readonly kind: 'source.sequence'; readonly from: number; readonly to: number }
  | { readonly kind: 'source.textFile'; readonly path: string; readonly splitSizeBytes: number | undefined; readonly monitorIntervalMs?: number }
  | { readonly kind: 'source.connector'; readonly connector: string; readonly config: Readonly<Record<string, unknown>>; readonly bounded: boolean }
  | { readonly kind: 'source.collection'; readonly fn: UserFunction }
  | { readonly kind: 'source.generate'; readonly fn: UserFunction; readonly count: number | undefined; readonly ratePerSecond: number | undefined }
  | { readonly kind: 'keyed.reduce'; readonly key: UserFunction; readonly fn: UserFunction }
  | { readonly kind: 'keyed.sum'; readonly key: UserFunction; readonly field: string | number | undefined; readonly selector: UserFunction | undefined }
  | { readonly kind: ExtremumKind; readonly key: UserFunction; readonly field: string | number | undefined }
  | {
      readonly kind: 'keyed.aggregate';
      readonly key: UserFunction;
      readonly createAccumulator: UserFunction;
      readonly add: UserFunction;
      readonly getResult: UserFunction;
      readonly merge: UserFunction | undefined;
    }
  /**
   * A window operator (keyBy().window() or windowAll()): its assigner and trigger as plain data, and its
   * functions: `reduce`, or the aggregate's four, or none, each optionally with a window function `process`.
   */
  | {
      readonly kind: 'keyed.window';
      readonly key: UserFunction;
      readonly window: WindowAssignerSpec;
      readonly trigger: WindowTriggerSpec | undefined;
      readonly allowedLateness: number;
      readonly lateDataTag: string | undefined;
      readonly all: boolean;
      readonly function: WindowFunctionKind;
      readonly reduce?: UserFunction | undefined;
      readonly createAccumulator?: UserFunction | undefined;
      readonly add?: UserFunction | undefined;
      readonly getResult?: UserFunction | undefined;
      readonly merge?: UserFunction | undefined;
      readonly process?: UserFunction | undefined;
    }
  | { readonly kind: 'map' | 'flatMap' | 'filter'; readonly fn: UserFunction }
  /** A ProcessFunction (or a rich map / flatMap / filter run as one), or a KeyedProcessFunction after keyBy: user objects. */
  | { readonly kind: 'process'; readonly fn: object }
  | { readonly kind: 'keyed.process'; readonly key: UserFunction; readonly fn: object }
  | { readonly kind: 'timestampsAndWatermarks'; readonly strategy: object; readonly watermarkIntervalMs: number }
  /** `rolling` and `encoder` from a FileSink (sinkTo); writeAsText leaves them out. */
  | {
      readonly kind: 'sink.textFile';
      readonly path: string;
      readonly writeMode: WriteMode | undefined;
      readonly rolling?: RollingPolicySpec;
      readonly encoder?: UserFunction;
    }
  | { readonly kind: 'sink.collect'; readonly maxRecords: number | undefined }
  | {
      readonly kind: 'sink.connector';
      readonly connector: string;
      readonly config: Readonly<Record<string, unknown>>;
      /** The sink's user functions by role. */
      readonly fns: Readonly<Record<string, UserFunction>>;
    }
  | TwoInputTransformationSpec;

/**
 * An input of a transformation; `partitioner` is set when the user asked for one (e.g. `rebalance()`),
 * `exchange` when the user chose the edge's exchange mode, `keySelector` on the hash input of keyBy.
 */
export interface StreamInput {
  readonly from: Transformation;
  /** The input reads this side output (an OutputTag id) of `from` instead of its main output. */
  readonly sideOutput?: string;
  /** Which input of a two-input operator this is (0 or 1). @default 0 */
  readonly targetInput?: number;
  /** The role of the consumer's key selector for this input's hash edge. @default 'key' */
  readonly keyRole?: string;
  readonly partitioner?: Partitioner;
  readonly exchange?: ExchangeMode;
  readonly keySelector?: UserFunction;
}

/**
 * Whether an operator joins the chain of its input ('always', when the chaining rules allow), starts a
 * new chain that later operators may join ('head', startNewChain), or is chained to nothing ('never',
 * disableChaining).
 */
export type ChainingStrategy = 'always' | 'head' | 'never';

/** One recorded operator. Its id (`op-<n>`) follows creation order, so re-running a builder yields the same ids. */
export interface Transformation {
  readonly id: string;
  readonly spec: TransformationSpec;
  readonly inputs: readonly StreamInput[];
  /** Non-parallel operators (the collection source) always run with parallelism 1. */
  readonly nonParallel: boolean;
  name: string;
  parallelism: number | undefined;
  /** The number of key groups of its keyed state (setMaxParallelism); unset, the environment's or Flink's default. */
  maxParallelism: number | undefined;
  slotSharingGroup: string | undefined;
  chaining: ChainingStrategy;
  /** The user's stable id of the operator (uid(…)), unique in the job; unset: none. */
  uid: string | undefined;
}

/** An operator's name until the user gives it one: the method that made it. */
export const DEFAULT_NAMES: Record<OperatorKind, string> = {
  'source.sequence': 'fromSequence',
  'source.textFile': 'readTextFile',
  'source.connector': 'fromSource',
  'source.collection': 'fromCollection',
  'source.generate': 'generate',
  'keyed.reduce': 'reduce',
  'keyed.sum': 'sum',
  'keyed.aggregate': 'aggregate',
  'keyed.min': 'min',
  'keyed.max': 'max',
  'keyed.minBy': 'minBy',
  'keyed.maxBy': 'maxBy',
  'keyed.window': 'window',
  map: 'map',
  flatMap: 'flatMap',
  filter: 'filter',
  process: 'process',
  'keyed.process': 'process',
  timestampsAndWatermarks: 'Timestamps/Watermarks',
  'sink.textFile': 'writeAsText',
  'sink.connector': 'sinkTo',
  'sink.collect': 'collect',
  ...TWO_INPUT_DEFAULT_NAMES,
};
