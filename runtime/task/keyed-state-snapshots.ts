// Checkpoints of a keyed operator (Flink's StreamOperatorStateHandler with its InternalTimeServiceManager):
// the entries of its keyed state backend and the timers of its timer services, key group by key group in
// one file. At the barrier the snapshot takes the backend's entries and the timers' records (plain data
// nothing after the barrier changes); when no key group holds a state entry (state values may be mutated in
// place, so they are encoded at once), the encoding waits for the next turn of the event loop, after the
// barrier went on, and the bytes are written while the task goes on. A restore reads only the key groups of
// the backend's range, from any set of handles.
import { FloeError } from '../core/errors.js';
import type { CheckpointStreamFactory } from '../checkpoint/checkpoint-storage.js';
import type { OperatorSubtaskState } from '../protocol/checkpoints.js';
import { canonicalKey, keyGroupOf } from '../network/key-groups.js';
import type { KeyedStateBackend, KeyedStateEntry } from './state/keyed-state-backend.js';
import { snapshotFileName } from './state/operator-state-snapshot.js';
import { encodeKeyGroups, writeKeyGroups, type TimerRecord } from './state/key-group-snapshot.js';
import { readMergedKeyGroups } from './state/incremental-key-groups.js';
import type { HeapInternalTimerService } from './timer-service.js';

/** What a snapshot reads of a timer service (its timers by domain) and a restore gives back to it. */
export type SnapshotTimers = Pick<
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each operator has its own namespace type
  HeapInternalTimerService<any>,
  'eventTimeTimers' | 'processingTimeTimers' | 'registerEventTimeTimer' | 'registerProcessingTimeTimer'
>;

/** One timer service of an operator, by a name unique in the operator, with its namespace's plain form. */
export interface NamedTimerService {
  readonly name: string;
  readonly service: SnapshotTimers;
  /** The namespace as plain data (msgpack); the identity without it. */
  readonly toData?: (namespace: never) => unknown;
  readonly fromData?: (data: unknown) => unknown;
}

/** A timer as a snapshot reads it; `keyGroup`, when the service knows it, spares computing it from the key. */
interface SnapshotTimer {
  readonly key: unknown;
  readonly namespace: unknown;
  readonly timestamp: number;
  readonly keyGroup?: number;
}

/** The namespace of timers that have none (a KeyedProcessFunction's): written as 0, read back as undefined. */
export const NO_NAMESPACE = { toData: (): unknown => 0, fromData: (): unknown => undefined } as const;

/** A window's plain form [start, end], and the window made back by `make`. */
export const windowNamespace = <W extends { readonly start: number; readonly end: number }>(make: (start: number, end: number) => W) => ({
  toData: (w: W): unknown => [w.start, w.end],
  fromData: (d: unknown): unknown => make((d as number[])[0]!, (d as number[])[1]!),
});

export { snapshotFileName };

/** The backend cannot write or read checkpoints. */
export class StateSnapshotError extends FloeError {
  constructor(message: string) {
    super('NOT_SUPPORTED', message, { retryable: false });
  }
}

/**
 * Snapshots `backend` and `timers` into one key-grouped file of checkpoint `checkpointId`. What the snapshot
 * holds is taken before this returns its promise (the entries encoded, the timers as records of plain data):
 * records after the barrier never reach the snapshot.
 */
export function snapshotKeyedState(
  checkpointId: number,
  access: CheckpointStreamFactory,
  backend: KeyedStateBackend,
  timers: readonly NamedTimerService[],
  fileName: string,
): Promise<OperatorSubtaskState> {
  const range = backend.keyGroupRange;
  const byGroup = new Map<number, TimerRecord[]>();
  for (const t of timers) {
    const toData = (t.toData ?? ((n: unknown) => n)) as (n: unknown) => unknown;
    const add = (domain: 'event' | 'processing', timer: SnapshotTimer): void => {
      const group = timer.keyGroup ?? keyGroupOf(canonicalKey(timer.key), backend.maxParallelism);
      let list = byGroup.get(group);
      if (list === undefined) byGroup.set(group, (list = []));
      list.push({ service: t.name, domain, key: timer.key, namespace: toData(timer.namespace), timestamp: timer.timestamp });
    };
    for (const timer of t.service.eventTimeTimers()) add('event', timer);
    for (const timer of t.service.processingTimeTimers()) add('processing', timer);
  }
  if (backend.snapshotKeyGroups !== undefined) {
    return backend.snapshotKeyGroups(checkpointId, access, fileName, (g) => byGroup.get(g) ?? []).then(({ handles }) => ({ keyed: handles, operator: [] }));
  }
  const snapshotEntries = backend.snapshotEntries?.bind(backend);
  if (snapshotEntries === undefined) {
    return Promise.reject(new StateSnapshotError(`the keyed state backend (${backend.constructor.name}) cannot write its entries to a checkpoint`));
  }
  let encoded: ReturnType<typeof encodeKeyGroups>;
  try {
    const entries = new Map<number, KeyedStateEntry[]>();
    for (let g = range.start; g <= range.end; g++) {
      const list = snapshotEntries(g);
      if (list.length > 0) entries.set(g, list);
    }
    const contentsOf = (g: number) => ({ entries: entries.get(g) ?? [], timers: byGroup.get(g) ?? [] });
    if (entries.size === 0) {
      // Timers only: their records are plain data taken now, encoded once the barrier went on.
      return new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => writeKeyGroups(access, checkpointId, fileName, range, encodeKeyGroups(range, contentsOf)))
        .then((handle) => ({ keyed: [handle], operator: [] }));
    }
    encoded = encodeKeyGroups(range, contentsOf);
  } catch (e) {
    return Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
  return writeKeyGroups(access, checkpointId, fileName, range, encoded).then((handle) => ({ keyed: [handle], operator: [] }));
}

/**
 * Restores `backend` and `timers` from `restored` (undefined: a fresh start): the entries and timers of the
 * key groups the backend owns, from every keyed handle, whichever subtask wrote it.
 */
export async function restoreKeyedState(
  restored: OperatorSubtaskState | undefined,
  access: CheckpointStreamFactory,
  backend: KeyedStateBackend,
  timers: readonly NamedTimerService[],
): Promise<void> {
  if (restored === undefined || restored.keyed.length === 0) return;
  const byName = new Map(timers.map((t) => [t.name, t]));
  const restoreTimers = (list: readonly TimerRecord[]): void => {
    for (const t of list) {
      const named = byName.get(t.service);
      if (named === undefined) {
        throw new StateSnapshotError(
          `the checkpoint holds timers of a timer service '${t.service}' this operator does not have (it has ${[...byName.keys()].join(', ') || 'none'}); ` +
            'restore with the operator the checkpoint was taken with',
        );
      }
      const namespace = named.fromData === undefined ? t.namespace : named.fromData(t.namespace);
      backend.setCurrentKey(t.key);
      if (t.domain === 'event') named.service.registerEventTimeTimer(namespace, t.timestamp);
      else named.service.registerProcessingTimeTimer(namespace, t.timestamp);
    }
  };
  if (backend.restoreKeyGroups !== undefined) return backend.restoreKeyGroups(restored.keyed, access, restoreTimers);
  const restoreEntry = backend.restoreEntry?.bind(backend);
  if (restoreEntry === undefined)
    throw new StateSnapshotError(`the keyed state backend (${backend.constructor.name}) cannot restore entries from a checkpoint`);
  const delta = restored.keyed.find((k) => k.delta === true);
  if (delta !== undefined) {
    throw new StateSnapshotError(
      `the checkpoint holds a changelog delta (${delta.handle.uri}) that only the lmdb backend merges; restore with state.backend.type: lmdb, or from a savepoint`,
    );
  }
  // The last handle that holds a group wins.
  await readMergedKeyGroups(restored.keyed, backend.keyGroupRange, access, (_group, contents, last) => {
    if (!last) return;
    for (const entry of contents.entries) restoreEntry(entry);
    restoreTimers(contents.timers);
  });
}
