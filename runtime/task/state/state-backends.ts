// The keyed state backend a keyed operator gets (`state.backend.type`): on the heap (hashmap), or in an
// lmdb environment of its own under the TaskExecutor's local state folder, removed when the task ends.
import { join } from 'node:path';
import type { Clock } from '../../core/clock.js';
import { HeapKeyedStateBackend } from './heap-keyed-state-backend.js';
import type { KeyedStateBackend, KeyGroupRange } from './keyed-state-backend.js';
import { LmdbKeyedStateBackend } from './lmdb-keyed-state-backend.js';

/** Where and how the lmdb keyed state backend keeps a task's state. */
export interface LmdbStateBackendSettings {
  readonly type: 'lmdb';
  /** The TaskExecutor's local state folder: each keyed operator of a task has its environment below it. */
  readonly dir: string;
  /** Every how many checkpoints one is full (1: all; 'state.backend.incremental' off). */
  readonly fullEvery: number;
}

export interface KeyedStateBackendSpec {
  readonly maxParallelism: number;
  readonly keyGroupRange: KeyGroupRange;
  readonly clock: Clock;
  /** Unique among the TaskExecutor's running keyed operators: the attempt and the operator. */
  readonly name: string;
}

/** The backend of one keyed operator, as the settings say (undefined: the heap). */
export function createKeyedStateBackend(settings: LmdbStateBackendSettings | undefined, spec: KeyedStateBackendSpec): KeyedStateBackend {
  const { maxParallelism, keyGroupRange, clock } = spec;
  if (settings === undefined) return new HeapKeyedStateBackend({ maxParallelism, keyGroupRange, clock });
  const dir = join(settings.dir, spec.name.replace(/[^A-Za-z0-9_.-]+/g, '_'));
  return new LmdbKeyedStateBackend({ maxParallelism, keyGroupRange, clock, dir, fullEvery: settings.fullEvery });
}
