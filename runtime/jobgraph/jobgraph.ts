// The JobGraph: what a client submits. Vertices run a chain of operators taken from the job's
// library; edges say how records travel between them.
import type { JobId } from '../core/ids.js';

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
}

/**
 * One operator of a vertex's chain. Built-in sources and sinks carry their parameters; user
 * operators name their function in the library.
 */
export type OperatorSpec =
  | { readonly kind: 'source.sequence'; readonly id: string; readonly name: string; readonly from: number; readonly to: number }
  | { readonly kind: 'source.textFile'; readonly id: string; readonly name: string; readonly path: string; readonly splitSizeBytes: number }
  | { readonly kind: 'source.collection'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'map'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'flatMap'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'filter'; readonly id: string; readonly name: string; readonly fn: FunctionRef }
  | { readonly kind: 'sink.textFile'; readonly id: string; readonly name: string; readonly path: string }
  | { readonly kind: 'sink.collect'; readonly id: string; readonly name: string; readonly maxRecords: number };
export type OperatorKind = OperatorSpec['kind'];

export interface JobVertex {
  readonly id: string;
  readonly name: string;
  readonly parallelism: number;
  readonly maxParallelism: number;
  readonly slotSharingGroup: string;
  /** The operator chain, first operator first. A source vertex starts with a source operator. */
  readonly operators: readonly OperatorSpec[];
}

export interface JobEdge {
  readonly id: string;
  readonly source: string;
  readonly target: string;
  readonly distribution: DistributionPattern;
  readonly partitioner: Partitioner;
  readonly partitionType: PartitionType;
}

export interface JobGraph {
  readonly jobId: JobId;
  readonly name: string;
  /** The user-code library this job runs, content-addressed. */
  readonly library: { readonly sha256: string; readonly sizeBytes: number };
  /** The library export whose builder defines the job, and the arguments it was built with. */
  readonly program: { readonly export: string; readonly args: readonly string[] };
  readonly vertices: readonly JobVertex[];
  readonly edges: readonly JobEdge[];
}

export const isSourceOperator = (op: OperatorSpec): boolean => op.kind.startsWith('source.');
export const isSinkOperator = (op: OperatorSpec): boolean => op.kind.startsWith('sink.');
