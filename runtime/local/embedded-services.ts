// The embedded backends in one place: leases and job records in `<stateDir>/floe.db`, blobs in `<stateDir>/blobs/`.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { systemClock, type Clock } from '../core/clock.js';
import { FsBlobStore } from './fs-blob-store.js';
import { SqliteJobStore } from './sqlite-job-store.js';
import { SqliteLeaseStore } from './sqlite-lease-store.js';

export interface EmbeddedServices {
  readonly leaseStore: SqliteLeaseStore;
  readonly jobStore: SqliteJobStore;
  readonly blobStore: FsBlobStore;
  close(): Promise<void>;
}

export const embeddedPaths = {
  database: (stateDir: string): string => join(stateDir, 'floe.db'),
  blobs: (stateDir: string): string => join(stateDir, 'blobs'),
  /** Each TaskExecutor's own files (library cache, blocking partitions); removed when it ends. */
  taskExecutors: (stateDir: string): string => join(stateDir, 'taskexecutors'),
} as const;

export const taskExecutorWorkDir = (stateDir: string, resourceId: string): string => join(embeddedPaths.taskExecutors(stateDir), resourceId);

export function openEmbeddedServices(stateDir: string, clock: Clock = systemClock): EmbeddedServices {
  mkdirSync(stateDir, { recursive: true });
  const dbPath = embeddedPaths.database(stateDir);
  const leaseStore = new SqliteLeaseStore(dbPath, clock);
  let jobStore: SqliteJobStore;
  try {
    jobStore = new SqliteJobStore(dbPath, clock);
  } catch (error) {
    void leaseStore.close();
    throw error;
  }
  const blobStore = new FsBlobStore(embeddedPaths.blobs(stateDir));
  return {
    leaseStore,
    jobStore,
    blobStore,
    async close() {
      await Promise.all([leaseStore.close(), jobStore.close(), blobStore.close()]);
    },
  };
}
