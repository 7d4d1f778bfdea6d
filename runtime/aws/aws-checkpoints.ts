// Checkpoints on AWS: where a job's go ('state.checkpoints.dir', by default `s3://<cluster bucket>/<blob
// prefix>checkpoints`), with Flink's entropy injection ('s3.entropy.key', 's3.entropy.length'), and the
// JobManager's checkpoint services over them: S3 checkpoint storage and the DynamoDB CompletedCheckpointStore.
import { checkpointStorageFor, jobCheckpointsUri } from '../checkpoint/file-system-checkpoint-storage.js';
import type { FloeConfig } from '../core/config.js';
import type { JobId } from '../core/ids.js';
import type { CheckpointIDCounter } from '../ha/checkpoint-id-counter.js';
import type { CompletedCheckpointStore } from '../ha/completed-checkpoint-store.js';
import type { JobCheckpointServices } from '../jobmaster/job-checkpointing.js';

/** The folder of checkpoints under the blob prefix of the cluster's bucket, when 'state.checkpoints.dir' is unset. */
export const CHECKPOINTS_FOLDER = 'checkpoints/';

/** Where one job's checkpoints go: its folder (with the entropy marker, if any) and the entropy options. */
export interface JobCheckpointLocation {
  /** `<checkpoints dir>/<job id>`, an s3:// URI (or a local path when the dir names one). */
  readonly folder: string;
  /** Set only when the folder holds the marker. */
  readonly entropyKey?: string;
  readonly entropyLength?: number;
}

/** 'state.checkpoints.dir', else `s3://<bucket>/<blobPrefix>checkpoints`. */
export function awsCheckpointsDir(config: FloeConfig, bucket: string, blobPrefix: string): string {
  return config.checkpointsDir !== '' ? config.checkpointsDir : `s3://${bucket}/${blobPrefix}${CHECKPOINTS_FOLDER}`.replace(/\/+$/, '');
}

/** Where job `jobId` writes its checkpoints on AWS. */
export function jobCheckpointLocation(config: FloeConfig, bucket: string, blobPrefix: string, jobId: string): JobCheckpointLocation {
  const folder = jobCheckpointsUri(awsCheckpointsDir(config, bucket, blobPrefix), jobId);
  const key = config.s3EntropyKey;
  return key !== '' && folder.includes(key) ? { folder, entropyKey: key, entropyLength: config.s3EntropyLength } : { folder };
}

/**
 * Each job's checkpoint services on AWS: its storage in S3 (the JobManager's own credentials write the
 * metadata and delete what is discarded; tasks write their state with the job's vended ones), and `store`
 * (the DynamoDB CompletedCheckpointStore of the cluster's jobs table) with `idCounter` (the jobs table's
 * DynamoDB CheckpointIDCounter).
 */
export function awsCheckpointServices(
  config: FloeConfig,
  cluster: { readonly bucket: string; readonly blobPrefix: string },
  store: CompletedCheckpointStore,
  idCounter: CheckpointIDCounter,
): (jobId: JobId) => JobCheckpointServices {
  const dir = awsCheckpointsDir(config, cluster.bucket, cluster.blobPrefix);
  return (jobId) => {
    const location = jobCheckpointLocation(config, cluster.bucket, cluster.blobPrefix, jobId);
    const entropy = location.entropyKey !== undefined ? { entropyKey: location.entropyKey, entropyLength: location.entropyLength ?? 4 } : {};
    return { store, idCounter, storage: checkpointStorageFor(dir, jobId, entropy), storageUri: location.folder, ...entropy };
  };
}
