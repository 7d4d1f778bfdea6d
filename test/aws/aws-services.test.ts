// openAwsServices: the AWS backends opened from the environment, as the AWS entry points open them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAwsServices, readAwsServicesSettings } from '../../runtime/aws/aws-services.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { JobStatus } from '../../runtime/jobgraph/job-status.js';
import { newJobRecord } from '../contracts/job-store.contract.js';
import { awsServicesEnv, createTables, startEmulators, type Emulators, type TestTables } from './emulators.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

describe('openAwsServices on the emulators', () => {
  let emulators: Emulators;
  let tables: TestTables;
  beforeAll(async () => {
    emulators = await startEmulators();
    tables = await createTables(emulators);
  });
  afterAll(async () => {
    await emulators?.stop();
  });

  it('opens leases, jobs and blobs that two processes would share', async () => {
    const env = awsServicesEnv(emulators, tables, { blobPrefix: 'deployment-1/' });
    const clock = new ManualClock();
    const a = openAwsServices(env, clock);
    const b = openAwsServices(env, clock);
    try {
      const lease = await a.leaseStore.tryAcquire(leaseNames.jobMaster('j1'), 'jm-a', 'http://a', 10_000);
      expect(lease).toMatchObject({ epoch: 1 });
      expect(await b.leaseStore.tryAcquire(leaseNames.jobMaster('j1'), 'jm-b', 'http://b', 10_000)).toBeUndefined();

      const record = newJobRecord(clock);
      await a.jobStore.create(record);
      await b.jobStore.update(record.jobId, { status: JobStatus.RUNNING }, lease!.epoch);
      expect((await a.jobStore.get(record.jobId))?.status).toBe(JobStatus.RUNNING);

      await a.blobStore.put('jobs/j1/jobgraph.json', new TextEncoder().encode('{}'));
      expect(await b.blobStore.list('jobs/')).toEqual(['jobs/j1/jobgraph.json']);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    // Closing twice is harmless.
    await a.close();
  });
});

describe('readAwsServicesSettings', () => {
  const complete = {
    [FloeEnv.AWS_REGION]: 'eu-west-1',
    [FloeEnv.LEASE_TABLE]: 'floe-leases',
    [FloeEnv.JOB_TABLE]: 'floe-jobs',
    [FloeEnv.BUCKET]: 'floe-blobs',
  };

  it('reads a complete environment with its defaults', () => {
    expect(readAwsServicesSettings(complete)).toEqual({
      region: 'eu-west-1',
      leaseTable: 'floe-leases',
      jobTable: 'floe-jobs',
      bucket: 'floe-blobs',
      blobPrefix: '',
      maxClockSkewMs: 1_000,
    });
  });

  it('takes the region from AWS_REGION, one endpoint for both services, and per-service overrides', () => {
    const { [FloeEnv.AWS_REGION]: _, ...rest } = complete;
    const s = readAwsServicesSettings({
      ...rest,
      AWS_REGION: 'us-west-2',
      [FloeEnv.AWS_ENDPOINT]: 'http://127.0.0.1:4566',
      [FloeEnv.S3_ENDPOINT]: 'http://127.0.0.1:9000',
    });
    expect(s).toMatchObject({ region: 'us-west-2', dynamoDbEndpoint: 'http://127.0.0.1:4566', s3Endpoint: 'http://127.0.0.1:9000' });
  });

  it('names every missing or malformed variable in one ConfigurationError', () => {
    let error: unknown;
    try {
      readAwsServicesSettings({ [FloeEnv.AWS_ENDPOINT]: 'localhost:4566', [FloeEnv.LEASE_MAX_CLOCK_SKEW_MS]: 'soon' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    const message = (error as Error).message;
    for (const name of [
      'FLOE_AWS_REGION (or AWS_REGION)',
      'FLOE_LEASE_TABLE',
      'FLOE_JOB_TABLE',
      'FLOE_BUCKET',
      'FLOE_AWS_ENDPOINT must be an http(s) URL',
      'FLOE_LEASE_MAX_CLOCK_SKEW_MS',
    ]) {
      expect(message).toContain(name);
    }
  });
});
