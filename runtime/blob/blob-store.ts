// Port: blobs (JobGraphs, user-code libraries, results). Writes are atomic: a reader sees the whole
// object or none. Libraries are content-addressed by sha256.
import { createHash } from 'node:crypto';
import type { JobDataCredentials } from './data-credentials.js';

export interface BlobStore {
  put(key: string, data: Uint8Array): Promise<void>;
  /** undefined when absent. */
  get(key: string): Promise<Uint8Array | undefined>;
  exists(key: string): Promise<boolean>;
  delete(key: string): Promise<void>;
  /** Keys that start with `prefix`, sorted. */
  list(prefix: string): Promise<string[]>;
  close(): Promise<void>;
  /**
   * The same store reached with a job's vended credentials (a TaskExecutor fetching that job's library);
   * absent where a store takes no credentials (the local filesystem).
   */
  withCredentials?(credentials: JobDataCredentials): BlobStore;
}

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

export const blobKeys = {
  library: (sha256: string): string => `libraries/${sha256}.mjs`,
  jobGraph: (jobId: string): string => `jobs/${jobId}/jobgraph.json`,
  result: (jobId: string): string => `jobs/${jobId}/result.json`,
} as const;

/** Stores `data` under its sha256 (a no-op when already present) and returns the hash. */
export async function putContentAddressed(store: BlobStore, data: Uint8Array): Promise<string> {
  const sha = sha256Hex(data);
  const key = blobKeys.library(sha);
  if (!(await store.exists(key))) await store.put(key, data);
  return sha;
}
