// The session policy of a job's S3 credentials: what the JobManager passes to STS AssumeRole of the
// job-data role when it vends credentials to the job's tasks. The session can do only what both the role's
// policy and this policy allow, so a task of the job reads its own library and its declared inputs and
// writes its own staging areas (a streaming sink: the part files of its own target) and its own checkpoint
// folder, and nothing of any other job: not another job's staging, committed output, checkpoints, library
// or JobGraph.
import { blobKeys } from '../blob/blob-store.js';
import { s3StagingFolder } from '../blob/output-rules.js';
import { FloeError } from '../core/errors.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { JobCheckpointLocation } from './aws-checkpoints.js';
import { isS3Uri } from '../jobgraph/paths.js';
import { parseS3Uri } from './s3-output-store.js';

/** Where the cluster keeps its own objects (FLOE_BUCKET, FLOE_BLOB_PREFIX). */
export interface ClusterObjects {
  readonly bucket: string;
  /** '' or ending in '/'. */
  readonly blobPrefix: string;
  /** @default 'aws' */
  readonly partition?: string;
}

export interface SessionPolicy {
  readonly Version: '2012-10-17';
  readonly Statement: readonly {
    readonly Sid: string;
    readonly Effect: 'Allow';
    readonly Action: readonly string[];
    readonly Resource: readonly string[];
    readonly Condition?: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;
  }[];
}

/** STS refuses a packed session policy beyond 2,048 characters; the plain JSON is what is checked here. */
export const MAX_SESSION_POLICY_CHARS = 2048;

/**
 * The session policy for `jobGraph`'s tasks; `checkpoints`: where the job writes its checkpoints, when it
 * takes them on S3. Throws a FloeError (JOB_POLICY_TOO_LARGE) when the job names so many S3 paths that STS
 * would refuse it.
 */
export function jobSessionPolicy(jobGraph: JobGraph, cluster: ClusterObjects, checkpoints?: JobCheckpointLocation): SessionPolicy {
  const arn = (bucket: string, key: string): string => `arn:${cluster.partition ?? 'aws'}:s3:::${bucket}/${key}`;
  const inputs = new Set<string>();
  const staging = new Set<string>();
  const rollingParts = new Set<string>();
  const listedBuckets = new Set<string>();
  const listedPrefixes = new Set<string>();
  let inputPaths = 0;
  for (const vertex of jobGraph.vertices) {
    for (const op of vertex.operators) {
      if (op.kind === 'source.textFile' && isS3Uri(op.path)) {
        const { bucket, prefix } = parseS3Uri(op.path);
        inputPaths++;
        // The path names one object, or every object below it (runtime/aws/s3-input-store.ts).
        if (prefix === '') inputs.add(arn(bucket, '*'));
        else {
          inputs.add(arn(bucket, prefix));
          inputs.add(arn(bucket, `${prefix}/*`));
        }
      }
      // A checkpointing job's file sink, bounded or not, commits its parts with its checkpoints: as a streaming one.
      if (op.kind === 'sink.textFile' && (op.rolling !== undefined || checkpoints !== undefined) && isS3Uri(op.path)) {
        // A streaming sink rolls its parts straight into its target (multipart uploads completed as they
        // roll, runtime/aws/s3-rolling-parts.ts): it lists them and their uploads, looks at and writes
        // `<target>/part-*` only.
        const { bucket, prefix } = parseS3Uri(op.path);
        const parts = `${prefix === '' ? '' : `${prefix}/`}part-*`;
        rollingParts.add(arn(bucket, parts));
        listedBuckets.add(`arn:${cluster.partition ?? 'aws'}:s3:::${bucket}`);
        listedPrefixes.add(parts);
      } else if (op.kind === 'sink.textFile' && isS3Uri(op.path)) {
        const { bucket, prefix } = parseS3Uri(op.path);
        // Only the attempts' part files (`<staging>/<attempt>/part-<i>`, see partFile): the commit journal and the copy
        // marker at the staging area's root are the JobManager's, out of reach of the job's own code.
        staging.add(arn(bucket, `${prefix === '' ? '' : `${prefix}/`}${s3StagingFolder(jobGraph.jobId)}/*/part-*`));
      }
    }
  }
  const Statement: SessionPolicy['Statement'][number][] = [
    {
      Sid: 'ReadItsLibrary',
      Effect: 'Allow',
      Action: ['s3:GetObject'],
      Resource: [arn(cluster.bucket, `${cluster.blobPrefix}${blobKeys.library(jobGraph.library.sha256)}`)],
    },
  ];
  if (inputs.size > 0) Statement.push({ Sid: 'ReadItsInputs', Effect: 'Allow', Action: ['s3:GetObject'], Resource: [...inputs] });
  // A part is one PUT, or a multipart upload (its parts and completion are s3:PutObject), then its tag.
  if (staging.size > 0)
    Statement.push({
      Sid: 'WriteItsStaging',
      Effect: 'Allow',
      Action: ['s3:PutObject', 's3:PutObjectTagging', 's3:AbortMultipartUpload'],
      Resource: [...staging],
    });
  if (rollingParts.size > 0) {
    Statement.push({
      Sid: 'WriteItsRollingParts',
      Effect: 'Allow',
      Action: ['s3:PutObject', 's3:GetObject', 's3:AbortMultipartUpload'],
      Resource: [...rollingParts],
    });
    Statement.push({
      Sid: 'ListItsRollingParts',
      Effect: 'Allow',
      Action: ['s3:ListBucket'],
      Resource: [...listedBuckets],
      Condition: { StringLike: { 's3:prefix': [...listedPrefixes] } },
    });
    // A restored sink lists the uploads its failed attempt left open. IAM sets no s3:prefix for
    // ListBucketMultipartUploads, so a prefix condition would deny it: the grant is the bucket's, and the
    // session still aborts and writes only its own `<target>/part-*`.
    Statement.push({ Sid: 'ListItsOpenUploads', Effect: 'Allow', Action: ['s3:ListBucketMultipartUploads'], Resource: [...listedBuckets] });
  }
  if (checkpoints !== undefined && isS3Uri(checkpoints.folder)) {
    // Its tasks write and read their state files in the job's folder; with entropy, under any
    // `s3.entropy.length` characters in place of the marker (IAM's '?' is one character).
    const { bucket, prefix } = parseS3Uri(checkpoints.folder);
    const key = checkpoints.entropyKey;
    const folder = key === undefined ? prefix : prefix.split(key).join('?'.repeat(checkpoints.entropyLength ?? 4));
    Statement.push({ Sid: 'WriteItsCheckpoints', Effect: 'Allow', Action: ['s3:PutObject', 's3:GetObject'], Resource: [arn(bucket, `${folder}/*`)] });
  }
  const policy: SessionPolicy = { Version: '2012-10-17', Statement };
  const size = JSON.stringify(policy).length;
  if (size > MAX_SESSION_POLICY_CHARS) {
    throw new FloeError(
      'JOB_POLICY_TOO_LARGE',
      `job ${jobGraph.jobId} reads ${inputPaths} S3 paths and writes ${staging.size} S3 targets: the session policy that confines its tasks to them takes ${size} characters, STS accepts at most ${MAX_SESSION_POLICY_CHARS}; read fewer, wider prefixes (one folder instead of its files) or write fewer targets`,
    );
  }
  return policy;
}
