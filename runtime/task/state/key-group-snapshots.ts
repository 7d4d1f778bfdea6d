// Keyed state written key group by key group (Flink's KeyGroupsStateHandle): one file per snapshot with a
// section per key group, so a restore reads only the groups it owns, from any set of handles (rescaling).
// A section is present (it may hold no entries) or empty (zero bytes: the group is not in this file, as in an
// incremental snapshot that writes only the groups touched since the last one); for each key group the last
// handle in the list that holds it wins.
import { Packr, unpackMultiple } from 'msgpackr';
import type { KeyGroupsStateHandle } from '../../protocol/checkpoints.js';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { StateKind } from '../../api/state.js';
import type { KeyedStateEntry, KeyGroupRange } from './keyed-state-backend.js';

/** The codec of state values: the records' (BigInts of any size as an extension), buffers copied out. */
export const stateCodec = new Packr({
  useRecords: false,
  moreTypes: false,
  useBigIntExtension: true,
  structuredClone: false,
  bundleStrings: false,
  copyBuffers: true,
});

/** The first byte of a present section: msgpack's nil. */
const PRESENT = 0xc0;

/**
 * A key group's section: the marker, then per entry [state name, kind, key, value]. A map state's value
 * (a Map from the user key's canonical form to [user key, value]) travels as its [user key, value] pairs.
 */
export function encodeKeyGroupSection(entries: Iterable<KeyedStateEntry>): Buffer {
  const parts: Buffer[] = [Buffer.of(PRESENT)];
  for (const e of entries) {
    const value = e.kind === 'map' ? Array.from((e.value as Map<string, unknown>).values()) : e.value;
    parts.push(stateCodec.pack([e.stateName, e.kind, e.key, value]));
  }
  return Buffer.concat(parts);
}

/** The entries of a present section (map values as [user key, value] pairs); none for an empty one. */
export function decodeKeyGroupSection(section: Uint8Array): { stateName: string; kind: StateKind; key: unknown; value: unknown }[] {
  if (section.length === 0) return [];
  if (section[0] !== PRESENT)
    throw new Error(`a key-group section starts with 0x${PRESENT.toString(16)}, found 0x${section[0]!.toString(16)}: the file is no keyed-state snapshot`);
  if (section.length === 1) return [];
  const bytes = Buffer.from(section.buffer, section.byteOffset + 1, section.length - 1);
  return (unpackMultiple(bytes) as [string, StateKind, unknown, unknown][]).map(([stateName, kind, key, value]) => ({ stateName, kind, key, value }));
}

/** Builds one file of the groups [range.start, range.end]: `section(g)` gives group g's bytes (empty: absent). */
export function keyGroupsFile(range: KeyGroupRange, section: (group: number) => Buffer): { bytes: Buffer; offsets: number[]; present: number } {
  const parts: Buffer[] = [];
  const offsets: number[] = [];
  let at = 0;
  let present = 0;
  for (let g = range.start; g <= range.end; g++) {
    offsets.push(at);
    const s = section(g);
    if (s.length > 0) present++;
    parts.push(s);
    at += s.length;
  }
  return { bytes: Buffer.concat(parts, at), offsets, present };
}

/** The byte range [from, to) of group `g` in a handle (g inside its range). */
export function sectionOf(handle: KeyGroupsStateHandle, g: number): { from: number; to: number } {
  const i = g - handle.start;
  const from = handle.offsets[i]!;
  const to = i + 1 < handle.offsets.length ? handle.offsets[i + 1]! : handle.handle.size;
  return { from, to };
}

/** Whether a handle holds group g (a present section). */
export const holds = (handle: KeyGroupsStateHandle, g: number): boolean => {
  if (g < handle.start || g > handle.end) return false;
  const { from, to } = sectionOf(handle, g);
  return to > from;
};

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
 * Reads the key groups of `range` from `handles` (the last holder of each group wins), one ranged read per
 * handle, and hands each group's entries to `restore`.
 */
export async function readKeyGroups(
  handles: readonly KeyGroupsStateHandle[],
  range: KeyGroupRange,
  streams: Pick<CheckpointStreamFactory, 'read'>,
  restore: (group: number, entries: ReturnType<typeof decodeKeyGroupSection>) => void,
): Promise<{ bytesRead: number }> {
  const winner = new Map<number, number>();
  handles.forEach((h, i) => {
    for (let g = Math.max(h.start, range.start); g <= Math.min(h.end, range.end); g++) if (holds(h, g)) winner.set(g, i);
  });
  let bytesRead = 0;
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i]!;
    const groups = [...winner].filter(([, w]) => w === i).map(([g]) => g);
    if (groups.length === 0) continue;
    groups.sort((a, b) => a - b);
    const from = sectionOf(h, groups[0]!).from;
    const to = sectionOf(h, groups[groups.length - 1]!).to;
    const bytes = await streams.read(h.handle, { offset: from, length: to - from });
    bytesRead += bytes.length;
    for (const g of groups) {
      const s = sectionOf(h, g);
      restore(g, decodeKeyGroupSection(bytes.subarray(s.from - from, s.to - from)));
    }
  }
  return { bytesRead };
}
