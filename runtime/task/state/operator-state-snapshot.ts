// The format of operator (non-keyed) state in a checkpoint (Flink's OperatorStateBackend snapshot): named
// lists of entries — a source reader's splits with their positions, a broadcast state's entries — in one
// msgpack file per operator subtask. On restore at another parallelism a `split` list is dealt out among
// the new subtasks and a `union` list is given whole to each (Flink's ListState and UnionListState).
import { randomUUID } from 'node:crypto';
import { Packr } from 'msgpackr';
import type { CheckpointStreamFactory } from '../../checkpoint/checkpoint-storage.js';
import type { OperatorStateHandle } from '../../protocol/checkpoints.js';
import { KeyGroupFormatError } from './key-group-snapshot.js';
// The stream elements' codec extensions are registered before anything is encoded or decoded.
import '../../network/stream-elements.js';

const packr = new Packr({ useRecords: false, moreTypes: false, useBigIntExtension: true, structuredClone: false, bundleStrings: false });

/** One named list of operator state. */
export interface OperatorStateList {
  readonly name: string;
  readonly mode: 'split' | 'union';
  readonly entries: readonly unknown[];
}

/** Which share of `split` lists a restoring subtask takes (absent: every entry of the handles it is given). */
export interface SubtaskShare {
  readonly subtaskIndex: number;
  readonly parallelism: number;
}

/**
 * Writes `lists` as one file of checkpoint `checkpointId`. The lists are encoded before the returned
 * promise's first await: changes after the call never reach the file.
 */
export function snapshotOperatorState(
  checkpointId: number,
  access: CheckpointStreamFactory,
  lists: readonly OperatorStateList[],
  fileName: string,
): Promise<OperatorStateHandle> {
  let bytes: Uint8Array;
  try {
    bytes = packr.pack(lists.map((l) => [l.name, l.mode, l.entries]));
  } catch (e) {
    return Promise.reject(e instanceof Error ? e : new Error(String(e)));
  }
  return access
    .write(checkpointId, fileName, bytes)
    .then((handle) => ({ handle, lists: lists.map((l) => ({ name: l.name, mode: l.mode, count: l.entries.length })) }));
}

/**
 * The lists of `handles` for one restoring subtask, by name: a union list's entries of every handle; a
 * split list's entries of every handle (only those a handle's `assigned` names, when it names the list),
 * dealt round-robin among `share.parallelism` subtasks (this one takes those at positions ≡
 * share.subtaskIndex), or all of them without a share (the handles were already assigned to this subtask).
 */
export async function readOperatorState(
  handles: readonly OperatorStateHandle[],
  access: CheckpointStreamFactory,
  share?: SubtaskShare,
): Promise<Map<string, unknown[]>> {
  const all = new Map<string, { mode: 'split' | 'union'; entries: unknown[] }>();
  for (const h of handles) {
    if (h.lists.length === 0) continue;
    const decoded = packr.unpack(await access.read(h.handle)) as [string, 'split' | 'union', unknown[]][];
    if (!Array.isArray(decoded)) throw new KeyGroupFormatError(`operator state ${h.handle.uri} decodes to ${typeof decoded}, expected an array of lists`);
    for (const [name, mode, written] of decoded) {
      // A split list's entries the JobMaster dealt to this subtask (Object.hasOwn: a list may be named '__proto__').
      const picks = mode === 'split' && h.assigned !== undefined && Object.hasOwn(h.assigned, name) ? h.assigned[name]! : undefined;
      const entries = picks === undefined ? written : picks.map((i) => written[i]);
      const list = all.get(name);
      if (list === undefined) all.set(name, { mode, entries: [...entries] });
      else if (list.mode !== mode) throw new KeyGroupFormatError(`operator state list '${name}' is ${list.mode} in one handle and ${mode} in another`);
      else list.entries.push(...entries);
    }
  }
  const out = new Map<string, unknown[]>();
  for (const [name, { mode, entries }] of all) {
    out.set(name, mode === 'union' || share === undefined ? entries : entries.filter((_, i) => i % share.parallelism === share.subtaskIndex));
  }
  return out;
}

/** A file name of a snapshot, unique in a checkpoint, readable in listings. */
export function snapshotFileName(operatorName: string, subtaskIndex: number, what: string): string {
  const safe = operatorName.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 60);
  return `${safe}-${subtaskIndex}-${what}-${randomUUID().slice(0, 8)}`;
}
