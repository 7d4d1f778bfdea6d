// Branded identifiers: the compiler keeps a JobId from being passed where an AllocationId is due.
import { randomBytes } from 'node:crypto';

declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

export type JobId = Brand<string, 'JobId'>;
/** Identifies one TaskExecutor process (or the JobManager process hosting JM + RM). */
export type ResourceId = Brand<string, 'ResourceId'>;
export type AllocationId = Brand<string, 'AllocationId'>;
export type ExecutionAttemptId = Brand<string, 'ExecutionAttemptId'>;
export type JobVertexId = Brand<string, 'JobVertexId'>;
/** One producer subtask's output for one edge: `<edgeId>.<producerSubtask>.<attemptId>`. */
export type ResultPartitionId = Brand<string, 'ResultPartitionId'>;
/** The leader's lease epoch. Every call to a fenced component carries the caller's view of it. */
export type FencingToken = Brand<number, 'FencingToken'>;

/**
 * Random bytes are drawn from the system a pool at a time: one call per id cost ~10 µs, which made a
 * job of 20,000 subtasks spend a quarter of a second naming their attempts. Pooled bytes are used once.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolOffset = 0;

export function randomHex(bytes = 16): string {
  if (bytes > POOL_BYTES) return randomBytes(bytes).toString('hex');
  if (poolOffset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export const JobId = {
  random: (): JobId => randomHex(16) as JobId,
  isValid: (s: unknown): s is JobId => typeof s === 'string' && JOB_ID_PATTERN.test(s),
  /** Use only on strings checked with `isValid` or produced by Floe itself. */
  of: (s: string): JobId => s as JobId,
};
export const ResourceId = {
  random: (prefix: string): ResourceId => `${prefix}-${randomHex(4)}` as ResourceId,
  of: (s: string): ResourceId => s as ResourceId,
};
export const AllocationId = {
  random: (): AllocationId => randomHex(8) as AllocationId,
  of: (s: string): AllocationId => s as AllocationId,
};
export const ExecutionAttemptId = {
  random: (): ExecutionAttemptId => randomHex(8) as ExecutionAttemptId,
  of: (s: string): ExecutionAttemptId => s as ExecutionAttemptId,
};
export const JobVertexId = { of: (s: string): JobVertexId => s as JobVertexId };
export const ResultPartitionId = { of: (s: string): ResultPartitionId => s as ResultPartitionId };
export const FencingToken = { of: (epoch: number): FencingToken => epoch as FencingToken };

/** A slot is addressed by its TaskExecutor and its index there. */
export interface SlotId {
  readonly resourceId: ResourceId;
  readonly slotIndex: number;
}
export const slotIdString = (s: SlotId): string => `${s.resourceId}/${s.slotIndex}`;
