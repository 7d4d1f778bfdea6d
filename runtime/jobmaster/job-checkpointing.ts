// A JobMaster's checkpointing: when the job's settings (its JobGraph's over the cluster's
// `execution.checkpointing.*`) turn it on and the JobManager gave it a CompletedCheckpointStore and the
// job's CheckpointStorage, a CheckpointCoordinator over the scheduler's executions, reaching each task
// through the TaskExecutor it runs on, fenced by the JobMaster's token. Without them nothing changes.
import type { Clock } from '../core/clock.js';
import type { FloeConfig } from '../core/config.js';
import type { ExecutionAttemptId, FencingToken } from '../core/ids.js';
import type { Logger } from '../core/logger.js';
import type { CheckpointStorage } from '../checkpoint/checkpoint-storage.js';
import { checkpointOptionsOf, resolveCheckpointing } from '../checkpoint/checkpointing-settings.js';
import type { CheckpointConfigView } from '../ha/checkpoint-stats.js';
import type { CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import type { CompletedCheckpointStore } from '../ha/completed-checkpoint-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { TaskCheckpointing } from '../protocol/task-deployment.js';
import type { TaskExecutorGateway } from '../protocol/taskexecutor-gateway.js';
import { CheckpointCoordinator, type CheckpointFailureError, type CheckpointTask } from './checkpoint-coordinator.js';

/** What the JobManager gives a JobMaster for checkpoints (chosen at the entry point: SQLite or DynamoDB, files or S3). */
export interface JobCheckpointServices {
  readonly store: CompletedCheckpointStore;
  /** The job's checkpoint ids, shared with every other JobMaster of the job (in the store's database). */
  readonly idCounter: CheckpointIDCounter;
  /** The job's checkpoint storage (`<state.checkpoints.dir>/<job id>`). */
  readonly storage: CheckpointStorage;
  /** Its folder's URI, as the tasks open it (TaskDeploymentDescriptor.checkpointing). */
  readonly storageUri: string;
  /** 's3.entropy.key' and 's3.entropy.length', as the tasks inject entropy into the keys of their state files. @default - none */
  readonly entropyKey?: string;
  readonly entropyLength?: number;
}

/** What each task of the job is deployed with when the job checkpoints; undefined otherwise. */
export function taskCheckpointingOf(jobGraph: JobGraph, config: FloeConfig, services: JobCheckpointServices | undefined): TaskCheckpointing | undefined {
  const settings = resolveCheckpointing(jobGraph.checkpointing, config);
  if (settings === undefined || services === undefined) return undefined;
  return {
    storageUri: services.storageUri,
    options: checkpointOptionsOf(settings),
    ...(services.entropyKey !== undefined && services.entropyKey !== '' ? { entropyKey: services.entropyKey, entropyLength: services.entropyLength ?? 4 } : {}),
  };
}

export interface JobCheckpointingArgs {
  readonly jobGraph: JobGraph;
  readonly config: FloeConfig;
  readonly services: JobCheckpointServices | undefined;
  readonly token: FencingToken;
  readonly clock: Clock;
  readonly log: Logger;
  /** Every subtask's current attempt. */
  readonly tasks: () => readonly CheckpointTask[];
  /** The gateway of the TaskExecutor running an attempt, if it runs somewhere. */
  readonly gatewayOf: (attemptId: ExecutionAttemptId) => TaskExecutorGateway | undefined;
  readonly failJob: (cause: CheckpointFailureError) => void;
  /** The splits a FINISHED source attempt read to their end. */
  readonly finishedSplitsOf?: (attemptId: ExecutionAttemptId) => readonly string[] | undefined;
  readonly runAsync: (work: () => Promise<void>) => void;
  /** The coordinator's statistics changed (a checkpoint started or ended, a restore). */
  readonly statsChanged?: () => void;
}

/** The job's CheckpointCoordinator, or undefined when the job does not checkpoint. */
export function createJobCheckpointing(args: JobCheckpointingArgs): CheckpointCoordinator | undefined {
  const settings = resolveCheckpointing(args.jobGraph.checkpointing, args.config);
  if (settings === undefined || args.services === undefined) return undefined;
  const upstream = new Map<string, string[]>();
  for (const e of args.jobGraph.edges) upstream.set(e.target, [...(upstream.get(e.target) ?? []), e.source]);
  const send = async (attemptId: ExecutionAttemptId, call: (gateway: TaskExecutorGateway) => Promise<void>): Promise<void> => {
    const gateway = args.gatewayOf(attemptId);
    if (gateway === undefined) throw new Error(`task attempt ${attemptId} runs on no registered TaskExecutor`);
    await call(gateway);
  };
  return new CheckpointCoordinator({
    jobId: args.jobGraph.jobId,
    epoch: args.token,
    config: {
      intervalMs: settings.intervalMs,
      timeoutMs: settings.timeoutMs,
      minPauseMs: settings.minPauseMs,
      tolerableFailedCheckpoints: settings.tolerableFailures,
      numRetained: settings.numRetained,
      options: checkpointOptionsOf(settings),
      externalizedRetention: settings.externalizedRetention,
    },
    clock: args.clock,
    storage: args.services.storage,
    store: args.services.store,
    idCounter: args.services.idCounter,
    plan: { tasks: args.tasks, upstreamOf: (vertexId) => upstream.get(vertexId) ?? [] },
    messenger: {
      triggerCheckpoint: (attemptId, checkpointId, timestampMs, options) =>
        send(attemptId, (g) => g.triggerCheckpoint(attemptId, checkpointId, timestampMs, options, args.token)),
      notifyCheckpointComplete: (attemptId, checkpointId) => send(attemptId, (g) => g.notifyCheckpointComplete(attemptId, checkpointId, args.token)),
      notifyCheckpointAborted: (attemptId, checkpointId) => send(attemptId, (g) => g.notifyCheckpointAborted(attemptId, checkpointId, args.token)),
    },
    failJob: args.failJob,
    ...(args.finishedSplitsOf !== undefined ? { finishedSplitsOf: args.finishedSplitsOf } : {}),
    runAsync: args.runAsync,
    log: args.log,
    ...(args.statsChanged !== undefined && { statsChanged: args.statsChanged }),
  });
}

/** The job's checkpointing settings as GET /jobs/:id/checkpoints/config shows them; undefined when it does not checkpoint. */
export function checkpointConfigViewOf(jobGraph: JobGraph, config: FloeConfig, services: JobCheckpointServices | undefined): CheckpointConfigView | undefined {
  const settings = resolveCheckpointing(jobGraph.checkpointing, config);
  if (settings === undefined || services === undefined) return undefined;
  return {
    mode: settings.mode,
    intervalMs: settings.intervalMs,
    timeoutMs: settings.timeoutMs,
    minPauseMs: settings.minPauseMs,
    maxConcurrent: settings.maxConcurrent,
    tolerableFailures: settings.tolerableFailures,
    unaligned: settings.unaligned,
    alignedCheckpointTimeoutMs: settings.alignedCheckpointTimeoutMs,
    externalizedRetention: settings.externalizedRetention,
    numRetained: settings.numRetained,
    stateBackend: config.stateBackend,
    storageUri: services.storageUri,
  };
}
