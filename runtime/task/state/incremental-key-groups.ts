// Incremental keyed-state snapshots in the key-group format of key-group-snapshot.ts: a file holds a
// section per key group that is present (it may hold nothing: one empty msgpack array) or absent (zero
// bytes: the group is not in this file, as in an incremental snapshot that writes only the groups touched
// since the last completed checkpoint). For each key group the last handle in the list that holds it wins.
import { Packr } from 'msgpackr';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';
import { encodeKeyGroup, readKeyGroups, type KeyGroupContents, type TimerRecord } from './key-group-snapshot.js';

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
export function presentSection(entries: KeyedStateEntry[], timers: TimerRecord[]): Uint8Array {
  const bytes = encodeKeyGroup({ entries, timers });
  return bytes.length === 0 ? PRESENT_EMPTY : bytes;
}

/** Whether a handle holds group g (a present section). */
function holds(handle: KeyGroupsStateHandle, g: number): boolean {
  if (g < handle.start || g > handle.end) return false;
  const i = g - handle.start;
  const to = i + 1 < handle.offsets.length ? handle.offsets[i + 1]! : handle.handle.size;
  return to > handle.offsets[i]!;
}

/** The handles still needed for `range`: those that hold, for some group, its last present section. */
export function liveHandles(handles: readonly KeyGroupsStateHandle[], range: KeyGroupRange): KeyGroupsStateHandle[] {
  const winner = new Map<number, number>();
  handles.forEach((h, i) => {
    for (let g = Math.max(h.start, range.start); g <= Math.min(h.end, range.end); g++) if (holds(h, g)) winner.set(g, i);
  });
  const needed = new Set(winner.values());
  return handles.filter((_, i) => needed.has(i));
}

/**
 * Reads the key groups of `range` from `handles`, the last holder of each group winning (later handles
 * are read first and older sections of a group already read are skipped), and hands each group's
 * contents to `restore` once.
 */
export async function readLatestKeyGroups(
  handles: readonly KeyGroupsStateHandle[],
  range: KeyGroupRange,
  access: CheckpointStreamFactory,
  restore: (group: number, contents: KeyGroupContents) => void,
): Promise<void> {
  const done = new Set<number>();
  for (const h of [...liveHandles(handles, range)].reverse()) {
    await readKeyGroups([h], range, access, (group, contents) => {
      if (done.has(group)) return;
      done.add(group);
      restore(group, contents);
    });
  }
}
