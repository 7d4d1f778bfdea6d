// What the JobMaster deletes of a job's checkpoints (Flink's CheckpointsCleaner with its retention policy):
// a discarded checkpoint's own files — its folder, and its state files under entropy-injected keys, which
// only its metadata names — and at the job's end everything of the job's checkpoints that no retained
// checkpoint references: aborted checkpoints' files, shared files no longer needed, a failed attempt's
// uploads. Shared files that only an aborted checkpoint took up are deleted while the job runs, once a
// later checkpoint completed without them (AbortedSharedFiles).
import type { CheckpointStorage } from '../checkpoint/checkpoint-storage.js';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { CompletedCheckpoint } from '../ha/completed-checkpoint-store.js';
import type { StreamStateHandle, TaskStateSnapshot } from '../protocol/checkpoints.js';

/** The state files a set of subtask snapshots refers to: those of this checkpoint alone, and the shared ones. */
export interface CheckpointFiles {
  readonly own: readonly StreamStateHandle[];
  readonly shared: readonly StreamStateHandle[];
}

/**
 * The shared files aborted checkpoints' tasks reported. A later checkpoint may build on one (an incremental
 * backend's next delta builds on the last snapshot it wrote, completed or not), so none goes at the abort.
 * Once a later checkpoint completes, those it does not reference never will be: each task's next snapshot
 * builds on what it wrote for that one or later, and a restore reads only completed checkpoints. Those it
 * references are a retained checkpoint's, deleted when no retained checkpoint needs them.
 */
export class AbortedSharedFiles {
  private readonly files = new Map<string, { readonly handle: StreamStateHandle; readonly checkpointId: number }>();

  /** Checkpoint `checkpointId` was aborted after its tasks reported `shared`. */
  aborted(checkpointId: number, shared: readonly StreamStateHandle[]): void {
    for (const handle of shared) this.files.set(handle.uri, { handle, checkpointId });
  }

  /**
   * Checkpoint `checkpointId` completed, `retained` the checkpoints kept after it: the files of checkpoints
   * aborted before it that none of them references, no longer tracked.
   */
  unreferencedAfter(checkpointId: number, retained: readonly CompletedCheckpoint[]): StreamStateHandle[] {
    if (this.files.size === 0) return [];
    const referenced = new Set(retained.flatMap((c) => c.sharedState.map((s) => s.uri)));
    const unreferenced: StreamStateHandle[] = [];
    for (const [uri, f] of this.files) {
      if (f.checkpointId > checkpointId) continue;
      this.files.delete(uri);
      if (!referenced.has(uri)) unreferenced.push(f.handle);
    }
    return unreferenced;
  }
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

/** What a checkpoint's metadata names; none when it cannot be read (its folder still goes), said in the log. */
export async function filesOrNone(storage: CheckpointStorage, checkpoint: CompletedCheckpoint, log: Logger): Promise<CheckpointFiles> {
  try {
    return await readCheckpointFiles(storage, checkpoint);
  } catch (error) {
    log.warn("a checkpoint's metadata could not be read: its files outside its folder stay", {
      checkpointId: checkpoint.checkpointId,
      error: errorMessage(error),
    });
    return { own: [], shared: [] };
  }
}

/**
 * The files of a job whose checkpoints the store removed (`removed`) or kept (`kept`, retained on
 * cancellation) at its end: everything no kept checkpoint references is deleted — by listing the job's
 * files, or, where the storage cannot list, the removed checkpoints' own (`ownFiles` by id, else their
 * metadata's) and shared files. The kept ones are logged with their paths. Failures are logged, never thrown.
 */
export async function cleanUpAtJobEnd(
  storage: CheckpointStorage,
  o: {
    readonly end: string;
    readonly removed: readonly CompletedCheckpoint[];
    readonly kept: readonly CompletedCheckpoint[];
    readonly ownFiles: ReadonlyMap<number, readonly StreamStateHandle[]>;
    readonly log: Logger;
  },
): Promise<void> {
  const { end, removed, kept, log } = o;
  const keptFiles: { checkpoint: CompletedCheckpoint; files: CheckpointFiles }[] = [];
  try {
    for (const c of kept) keptFiles.push({ checkpoint: c, files: await readCheckpointFiles(storage, c) });
  } catch (error) {
    // Without what a kept checkpoint references, nothing is safe to delete.
    log.warn('checkpoints retained on cancellation, their folders left whole: a metadata file could not be read', { error: errorMessage(error) });
    return;
  }
  try {
    const deleted = await deleteUnreferenced(storage, keptFiles);
    if (deleted === undefined) {
      const shared = new Map<string, StreamStateHandle>();
      for (const c of removed) {
        await storage.discardCheckpoint(c.checkpointId, o.ownFiles.get(c.checkpointId) ?? (await filesOrNone(storage, c, log)).own);
        for (const h of c.sharedState) shared.set(h.uri, h);
      }
      if (shared.size > 0) await storage.deleteShared([...shared.values()]);
    }
    log.info("the job's checkpoint files no kept checkpoint references were deleted", { end, removed: removed.length, files: deleted?.length });
  } catch (error) {
    log.warn("the job's checkpoint files could not all be deleted", { end, error: errorMessage(error) });
  }
  if (kept.length > 0) {
    log.info('checkpoints retained on cancellation (resume with floe run --from-savepoint <path>)', {
      checkpoints: kept.map((c) => c.checkpointId),
      paths: kept.map((c) => c.metadataPointer),
    });
  }
}
