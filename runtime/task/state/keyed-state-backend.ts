// The keyed state backend port: the state of every key a subtask owns, partitioned by key groups so a
// snapshot can write, and a rescale move, whole groups.
import { FloeError } from '../../core/errors.js';
import type { StateDescriptor, StateKind } from '../../api/state.js';

import { defaultMaxParallelism } from '../../api/translate.js';
import type { TaskDeploymentDescriptor } from '../../protocol/task-deployment.js';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';

export { defaultMaxParallelism };

/** A task's number of key groups: its vertex's max parallelism, or Flink's default for its parallelism. */
export const maxParallelismOf = (tdd: Pick<TaskDeploymentDescriptor, 'parallelism' | 'maxParallelism'>): number =>
  tdd.maxParallelism ?? defaultMaxParallelism(tdd.parallelism);

/** The key groups a backend owns: [start, end], both included (Flink's KeyGroupRange). */
export interface KeyGroupRange {
  readonly start: number;
  readonly end: number;
}

/** One key's entry of one state, in the backend's stored form (time-to-live stamps included). */
export interface KeyedStateEntry {
  readonly stateName: string;
  readonly kind: StateKind;
  readonly key: unknown;
  readonly value: unknown;
}

/** A timer of one of an operator's timer services, by the service's name; `namespace` in its serialized form. */
export interface TimerRecord {
  readonly service: string;
  readonly domain: 'event' | 'processing';
  readonly key: unknown;
  readonly namespace: unknown;
  readonly timestamp: number;
}

export interface KeyedStateBackend {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  /** Makes `key` the one every state reads and writes until the next call. */
  setCurrentKey(key: unknown): void;
  getCurrentKey(): unknown;
  /** The key group of the current key. */
  getCurrentKeyGroup(): number;
  /** The state `descriptor` names, scoped to the current key; the same object for the same name. */
  getPartitionedState<S>(descriptor: StateDescriptor<S>): S;
  /** The entries of every state in `keyGroup`, for a snapshot written group by group. */
  keyGroupEntries(keyGroup: number): Iterable<KeyedStateEntry>;
  /**
   * The entries of `keyGroup` in the form a checkpoint writes (task/state/key-group-snapshot.ts), values
   * live: encode them before the task goes on. Absent: the backend takes no snapshots this way.
   */
  snapshotEntries?(keyGroup: number): KeyedStateEntry[];
  /** Puts back one entry snapshotEntries gave; its key lies in this backend's key groups. */
  restoreEntry?(entry: KeyedStateEntry): void;
  /**
   * Writes the backend's key groups itself, with each group's timers, in the same format (the lmdb
   * backend: incrementally, the copy pinned at the call while the task goes on). Present: snapshots use it
   * rather than snapshotEntries.
   */
  snapshotKeyGroups?(
    checkpointId: number,
    access: CheckpointStreamFactory,
    name: string,
    timersOf: (keyGroup: number) => TimerRecord[],
  ): Promise<{ handles: KeyGroupsStateHandle[]; bytesPersisted: number }>;
  /** Reads back what snapshotKeyGroups wrote (any handles, any ranges), each group's timers to `onTimers`. */
  restoreKeyGroups?(handles: readonly KeyGroupsStateHandle[], access: CheckpointStreamFactory, onTimers: (timers: TimerRecord[]) => void): Promise<void>;
  /** A checkpoint this backend wrote completed: incremental snapshots build on it. */
  notifyCheckpointComplete?(checkpointId: number): void;
  /** Drops every entry. */
  dispose(): void;
  /**
   * Resolves once nothing the backend started in the background still runs (an incremental backend's
   * materialization being written): a task reports its end after it, so no file of its appears later.
   */
  settled?(): Promise<void>;
}

/** A key whose group lies outside the backend's range reached it: the routing and the backend disagree. */
export class KeyGroupOutOfRangeError extends FloeError {
  constructor(message: string) {
    super('INTERNAL', message, { retryable: false });
  }
}

/** A state was read or written with no current key set. */
export class NoCurrentKeyError extends FloeError {
  constructor(stateName: string) {
    super('INTERNAL', `state '${stateName}' was used before a key was set; keyed state is readable only while a keyed record or timer is processed`, {
      retryable: false,
    });
  }
}

/** One name asked for two kinds of state. */
export class StateKindMismatchError extends FloeError {
  constructor(name: string, registered: StateKind, asked: StateKind) {
    super('USER_CODE', `state '${name}' is registered as ${registered} state and was asked for as ${asked} state; give each state its own name`, {
      retryable: false,
    });
  }
}
