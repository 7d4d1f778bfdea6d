// Port: each job's checkpoint id counter (Flink's CheckpointIDCounter), kept in the HA store and shared by
// every JobMaster of the job. getAndIncrement hands out each id once, in one atomic step of the store, so a
// deposed JobMaster and its successor never number two checkpoints alike: they never write into the same
// `chk-<id>` folder, and the deposed one's discard never deletes its successor's checkpoint. Ids never go
// back, and never fall below the floor a caller passes (its store's latest checkpoint + 1), so a counter
// that is behind what the store holds (a job recovered from an older store row) starts above it.
import { InvalidRequestError } from '../core/errors.js';
import type { JobId } from '../core/ids.js';

export interface CheckpointIDCounter {
  /**
   * Returns the job's next checkpoint id — the counter's value, or `atLeast` if that is higher — and
   * moves the counter past it, atomically: no two calls for a job, from any process, get the same id.
   * @param atLeast the lowest id the caller may use (the latest completed checkpoint's + 1). @default 1
   */
  getAndIncrement(jobId: JobId, atLeast?: number): Promise<number>;
  /** The lowest id the next getAndIncrement of the job can return (1 for a job it never counted for). */
  get(jobId: JobId): Promise<number>;
  close(): Promise<void>;
}

/** Checks a caller's floor: a positive safe integer. */
export function checkFloor(atLeast: number): number {
  if (!Number.isSafeInteger(atLeast) || atLeast < 1) {
    throw new InvalidRequestError(`a checkpoint id floor is a positive integer (the latest checkpoint id + 1), found ${atLeast}`);
  }
  return atLeast;
}

/** The id a counter whose next id is `next` (undefined: never counted) hands out for a caller's floor. */
export const nextIdFrom = (next: number | undefined, atLeast: number): number => Math.max(next ?? 1, atLeast);
