// Incremental keyed-state snapshots in the key-group format of key-group-snapshot.ts: a file holds a
// section per key group that is present (it may hold nothing: one empty msgpack array) or absent (zero
// bytes: the group is not in this file). A full handle's section replaces the group; a changelog delta's
// (KeyGroupsStateHandle.delta) is merged onto the last full section before it and the deltas between, in
// the order of the list. A group's timers are those of the last handle that holds it.
import { Packr } from 'msgpackr';
import { FloeError } from '../../core/errors.js';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';
import {
  decodeKeyGroup,
  encodeKeyGroup,
  readKeyGroupSections,
  SectionReadBuffer,
  type KeyGroupContents,
  type RemovedEntry,
  type TimerRecord,
} from './key-group-snapshot.js';

/** The codec of state values in lmdb: the records' (BigInts of any size as an extension), buffers copied out. */
export const stateCodec = new Packr({
  useRecords: false,
  moreTypes: false,
  useBigIntExtension: true,
  structuredClone: false,
  bundleStrings: false,
  copyBuffers: true,
});

/** A present section that holds nothing: msgpack's empty array. */
const PRESENT_EMPTY = Uint8Array.of(0x90);

/** A key group's section: present, even when it holds nothing. */
export function presentSection(entries: KeyedStateEntry[], timers: TimerRecord[], removed: RemovedEntry[] = []): Uint8Array {
  return present(encodeKeyGroup({ entries, timers, removed }));
}

/** A key group's encoded bytes as a present section: msgpack's empty array when they hold nothing. */
export function present(bytes: Uint8Array): Uint8Array {
  return bytes.length === 0 ? PRESENT_EMPTY : bytes;
}

/** Whether a handle holds group g (a present section). */
function holds(handle: KeyGroupsStateHandle, g: number): boolean {
  if (g < handle.start || g > handle.end) return false;
  const i = g - handle.start;
  const to = i + 1 < handle.offsets.length ? handle.offsets[i + 1]! : handle.handle.size;
  return to > handle.offsets[i]!;
}

/** A changelog delta with no full snapshot before it for a key group: the checkpoint lacks its base. */
export class MissingBaseSnapshotError extends FloeError {
  constructor(message: string) {
    super('STORE_UNREADABLE', `${message}; restore from another checkpoint or a savepoint`, { retryable: false });
  }
}

/**
 * Which handle each group of `range` restores from: `base`, the index of the last full handle that holds
 * it (every delta after it is merged on it), and `last`, the last handle that holds it (its timers are
 * the group's). Throws when a delta holds a group no full handle before it does.
 */
function restorePlan(handles: readonly KeyGroupsStateHandle[], range: KeyGroupRange): { base: Map<number, number>; last: Map<number, number> } {
  const base = new Map<number, number>();
  const last = new Map<number, number>();
  handles.forEach((h, i) => {
    for (let g = Math.max(h.start, range.start); g <= Math.min(h.end, range.end); g++) {
      if (!holds(h, g)) continue;
      last.set(g, i);
      if (h.delta !== true) base.set(g, i);
      else if (!base.has(g)) {
        throw new MissingBaseSnapshotError(`the changelog delta ${h.handle.uri} holds key group ${g}, but no full snapshot of that group comes before it`);
      }
    }
  });
  return { base, last };
}

/**
 * Reads the key groups of `range` from `handles`: for each group, the last full handle that holds it and
 * every delta after it, in the list's order, each group's contents handed to `apply` (`last`: the last
 * handle that holds the group, whose timers are the group's). Handles nothing needs are not read.
 */
export function readMergedKeyGroups(
  handles: readonly KeyGroupsStateHandle[],
  range: KeyGroupRange,
  access: CheckpointStreamFactory,
  apply: (group: number, contents: KeyGroupContents, last: boolean) => void,
): Promise<void> {
  return readMergedSections(handles, range, access, 'oldest first', (group, section, last) => apply(group, decodeKeyGroup(section), last));
}

/**
 * The same sections as readMergedKeyGroups, undecoded (key-group-records.ts reads them), oldest first or
 * newest first: for each group, the last handle that holds it (`last`), then each one before it down to its
 * last full handle. Newest first, a record met before is newer than any it meets again: a restore into an
 * empty backend keeps the first it meets and skips the rest. A section's bytes are valid only during its
 * `apply` call (the reads share one buffer).
 */
export async function readMergedSections(
  handles: readonly KeyGroupsStateHandle[],
  range: KeyGroupRange,
  access: CheckpointStreamFactory,
  order: 'oldest first' | 'newest first',
  apply: (group: number, section: Uint8Array, last: boolean) => void,
): Promise<void> {
  const { base, last } = restorePlan(handles, range);
  const buffer = new SectionReadBuffer();
  for (let n = 0; n < handles.length; n++) {
    const i = order === 'oldest first' ? n : handles.length - 1 - n;
    const h = handles[i]!;
    await readKeyGroupSections(
      h,
      range,
      access,
      (g) => (base.get(g) ?? Infinity) <= i && holds(h, g),
      (group, bytes) => apply(group, bytes, last.get(group) === i),
      buffer,
    );
  }
}
