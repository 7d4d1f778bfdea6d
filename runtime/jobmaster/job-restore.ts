// What a checkpointing job's deployments restore (Flink's CheckpointCoordinator.restoreLatestCheckpointedState):
// each subtask's share of the latest completed checkpoint at the moment it is deployed — or, before the job
// completed any, of the savepoint it was started from (JobGraph.savepointRestore). The shares are computed
// once per checkpoint; the first deployment after a start or a failure reports the restore to the stats.
import type { Logger } from '../core/logger.js';
import type { CheckpointStorage } from '../checkpoint/checkpoint-storage.js';
import { relocateSavepoint } from '../checkpoint/savepoint-location.js';
import { readsUnboundedSource } from '../jobgraph/boundedness.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { TaskRestore } from '../protocol/checkpoints.js';
import type { CheckpointCoordinator, CheckpointMetadata } from './checkpoint-coordinator.js';
import { assignTaskRestores, StateAssignmentError, subtaskKey } from './state-assignment.js';
import { RestoredSplitsCache, type RestoredSplits } from './source-restore.js';

/** What the exception history says restarted tasks began from: the checkpoint's id, or empty state in a streaming job without one. */
export function restoredStateOf(jobGraph: JobGraph, checkpointId: number | undefined): { restoredFrom?: number; restoredState?: 'empty' } {
  if (checkpointId !== undefined) return { restoredFrom: checkpointId };
  return readsUnboundedSource(jobGraph) ? { restoredState: 'empty' } : {};
}

export interface JobRestoreDeps {
  readonly jobGraph: JobGraph;
  readonly coordinator: CheckpointCoordinator;
  /** Reads a savepoint's metadata (its folder or `_metadata` URI). */
  readonly storage: CheckpointStorage;
  readonly log: Logger;
}

export class JobRestore {
  private savepoint: CheckpointMetadata | undefined;
  private readonly restoredSplits: RestoredSplitsCache;
  private assigned: { readonly metadata: CheckpointMetadata; readonly restores: ReadonlyMap<string, TaskRestore> } | undefined;
  /** A deployment round began (a start, a restart) whose restore is not yet reported. */
  private unreported = true;

  constructor(private readonly deps: JobRestoreDeps) {
    this.restoredSplits = new RestoredSplitsCache(deps.storage);
  }

  /** What the readers of source vertex `vertexId` restore now (they hold or had finished); undefined: no restore. */
  restoredSplitsOf(vertexId: string): Promise<RestoredSplits> | undefined {
    const metadata = this.current();
    const vertex = this.deps.jobGraph.vertices.find((v) => v.id === vertexId);
    return metadata === undefined || vertex === undefined ? undefined : this.restoredSplits.get(metadata, vertex);
  }

  /**
   * Before the first deployment (after the coordinator started): reads the latest completed checkpoint's
   * metadata (a JobMaster that took over), or with none the savepoint the job starts from, if any, and
   * checks that the job can take the savepoint's state.
   */
  async prepare(): Promise<void> {
    await this.deps.coordinator.readLatestMetadata();
    const from = this.deps.jobGraph.savepointRestore;
    if (from === undefined || this.deps.coordinator.latestCompletedMetadata() !== undefined) return;
    let metadata: CheckpointMetadata;
    try {
      metadata = JSON.parse(new TextDecoder().decode(await this.deps.storage.readMetadata(from.path))) as CheckpointMetadata;
      // A savepoint moved since it was written: its files are read where it is now.
      if (Array.isArray(metadata.subtasks)) metadata = relocateSavepoint(metadata, from.path);
    } catch (error) {
      throw new StateAssignmentError(
        `the savepoint at ${from.path} could not be read: ${error instanceof Error ? error.message : String(error)}; give the savepoint's folder or its _metadata file`,
      );
    }
    if (!Array.isArray(metadata.subtasks) || typeof metadata.checkpointId !== 'number') {
      throw new StateAssignmentError(`${from.path} is not a savepoint's metadata: it has no checkpointId and subtasks`);
    }
    this.assign(metadata, from.allowNonRestoredState);
    this.savepoint = metadata;
    this.deps.log.info('the job restores from a savepoint', { path: from.path, checkpointId: metadata.checkpointId });
  }

  /** The checkpoint (or savepoint) a deployment now restores from; undefined: none, tasks start empty. */
  current(): CheckpointMetadata | undefined {
    return this.deps.coordinator.latestCompletedMetadata() ?? this.savepoint;
  }

  /** Tasks fail over: their next deployments restore, and that restore is reported once. */
  restartBegins(): void {
    this.unreported = true;
  }

  /** What a deployment of the subtask carries: its share of the latest checkpoint, undefined with none. */
  restoreOf(vertexId: string, subtaskIndex: number): TaskRestore | undefined {
    const metadata = this.current();
    if (metadata === undefined) return undefined;
    const restores =
      this.assigned?.metadata === metadata
        ? this.assigned.restores
        : this.assign(metadata, this.deps.jobGraph.savepointRestore?.allowNonRestoredState ?? false);
    const restore = restores.get(subtaskKey(vertexId, subtaskIndex));
    if (restore !== undefined && this.unreported) {
      this.unreported = false;
      const completed = this.deps.coordinator.latestCompleted();
      const pointer = completed?.checkpointId === metadata.checkpointId ? completed.metadataPointer : (this.deps.jobGraph.savepointRestore?.path ?? '');
      this.deps.coordinator.reportRestored({ checkpointId: metadata.checkpointId, metadataPointer: pointer });
      this.deps.log.info('tasks restore from a checkpoint', { checkpointId: metadata.checkpointId });
    }
    return restore;
  }

  private assign(metadata: CheckpointMetadata, allowNonRestoredState: boolean): ReadonlyMap<string, TaskRestore> {
    const restores = assignTaskRestores(metadata, this.deps.jobGraph, { allowNonRestoredState });
    this.assigned = { metadata, restores };
    return restores;
  }
}
