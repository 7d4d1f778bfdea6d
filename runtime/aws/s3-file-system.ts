// The 's3' file system: text sources and sinks on `s3://bucket/key` paths. This module loads no AWS SDK:
// the S3 stores (and the SDK with them) load on the first S3 path a process touches, so a process that
// registers S3 but reads only local files (the embedded backend) starts as fast as without it.
import type { JobDataCredentials, JobDataCredentialsProvider } from '../blob/data-credentials.js';
import type { FileSystemFactory } from '../blob/file-systems.js';
import type { InputStore } from '../blob/input-store.js';
import { s3AttemptStagingLocation } from '../blob/output-rules.js';
import type { OutputStore } from '../blob/output-store.js';
import type { StateFileStore } from '../blob/state-files.js';

/**
 * The store made from this process's environment (region, endpoint, own credentials), and the stores of
 * vended credentials by access key: a task's job renews its credentials every hour or so, so a few are kept.
 */
function storesOf<S>(make: (credentials?: JobDataCredentials) => Promise<S>): (credentials?: JobDataCredentials) => Promise<S> {
  let own: Promise<S> | undefined;
  const byAccessKey = new Map<string, Promise<S>>();
  return (credentials) => {
    if (credentials === undefined) return (own ??= make());
    let store = byAccessKey.get(credentials.accessKeyId);
    if (store === undefined) {
      if (byAccessKey.size >= 4) byAccessKey.delete(byAccessKey.keys().next().value!);
      store = make(credentials);
      byAccessKey.set(credentials.accessKeyId, store);
    }
    return store;
  };
}

export const s3FileSystem: FileSystemFactory = {
  scheme: 's3',
  inputStore: storesOf<InputStore>((credentials) => import('./s3-input-store.js').then((m) => m.s3InputStoreFromEnv(process.env, credentials))),
  outputStore: storesOf<OutputStore>((credentials) => import('./s3-output-store.js').then((m) => m.s3OutputStoreFromEnv(process.env, credentials))),
  attemptStagingLocation: s3AttemptStagingLocation,
  stateFiles: storesOf<StateFileStore>((credentials) => import('./s3-state-files.js').then((m) => m.s3StateFileStoreFromEnv(process.env, credentials))),
};

/**
 * Job data credentials on AWS: STS AssumeRole of the job-data role FLOE_JOB_DATA_ROLE_ARN names, scoped
 * to each job's paths (runtime/aws/job-credentials.ts, loaded with its SDK on first use).
 */
export const stsJobDataCredentials: JobDataCredentialsProvider = (env) =>
  import('./job-credentials.js').then((m) => {
    const vendor = m.jobCredentialsVendorFromEnv(env);
    return vendor === undefined ? undefined : (jobGraph) => vendor.credentialsFor(jobGraph);
  });
