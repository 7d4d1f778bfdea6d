// What the JobMaster deletes of a job's checkpoints (Flink's CheckpointsCleaner with its retention policy):
// a discarded checkpoint's own files — its folder, and its state files under entropy-injected keys, which
// only its metadata names — and at the job's end everything of the job's checkpoints that no retained
// checkpoint references: aborted checkpoints' files, shared files no longer needed, a failed attempt's
// uploads.
import type { CheckpointStorage } from '../checkpoint/checkpoint-storage.js';
import type { CompletedCheckpoint } from '../ha/completed-checkpoint-store.js';
import type { StreamStateHandle, TaskStateSnapshot } from '../protocol/checkpoints.js';

/** The state files a set of subtask snapshots refers to: those of this checkpoint alone, and the shared ones. */
export interface CheckpointFiles {
  readonly own: readonly StreamStateHandle[];
  readonly shared: readonly StreamStateHandle[];
}

/** The files `states` refer to, each once. */
export function filesOfSnapshots(states: readonly TaskStateSnapshot[]): CheckpointFiles {
  const own = new Map<string, StreamStateHandle>();
  const shared = new Map<string, StreamStateHandle>();
  for (const state of states) {
    for (const op of Object.values(state.operators)) {
      for (const k of op.keyed) (k.shared === true ? shared : own).set(k.handle.uri, k.handle);
      for (const o of op.operator) own.set(o.handle.uri, o.handle);
      for (const h of op.inFlight ?? []) own.set(h.uri, h);
    }
  }
  for (const uri of shared.keys()) own.delete(uri);
  return { own: [...own.values()], shared: [...shared.values()] };
}

/** The files a checkpoint's `_metadata` names (its `subtasks[].state`). */
export function filesOfMetadata(metadata: { readonly subtasks: readonly { readonly state: TaskStateSnapshot }[] }): CheckpointFiles {
  return filesOfSnapshots(metadata.subtasks.map((s) => s.state));
}

/** Reads and parses a checkpoint's metadata; throws when it cannot be read or is not a checkpoint's. */
export async function readCheckpointFiles(storage: CheckpointStorage, checkpoint: CompletedCheckpoint): Promise<CheckpointFiles> {
  const parsed = JSON.parse(new TextDecoder().decode(await storage.readMetadata(checkpoint.metadataPointer))) as {
    subtasks?: { state: TaskStateSnapshot }[];
  };
  if (!Array.isArray(parsed.subtasks)) {
    throw new Error(`'${checkpoint.metadataPointer}' is not the metadata of checkpoint ${checkpoint.checkpointId}: it has no subtasks`);
  }
  return filesOfMetadata({ subtasks: parsed.subtasks });
}

/**
 * Every file of the job's checkpoints (listed by `storage`) that none of `retained` references — its
 * metadata, its own and its shared state files — deleted. Undefined when the storage cannot list its files.
 * Returns the URIs deleted.
 */
export async function deleteUnreferenced(
  storage: CheckpointStorage,
  retained: readonly { readonly checkpoint: CompletedCheckpoint; readonly files: CheckpointFiles }[],
): Promise<readonly string[] | undefined> {
  if (storage.listFiles === undefined || storage.deleteFiles === undefined) return undefined;
  const referenced = new Set<string>();
  for (const { checkpoint, files } of retained) {
    referenced.add(checkpoint.metadataPointer);
    for (const h of [...files.own, ...files.shared, ...checkpoint.sharedState]) referenced.add(h.uri);
  }
  const unreferenced = (await storage.listFiles()).filter((uri) => !referenced.has(uri));
  await storage.deleteFiles(unreferenced);
  return unreferenced;
}
