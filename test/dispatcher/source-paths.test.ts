// Submission on the embedded backend refuses an s3:// text source, saying that S3 sources need the AWS
// backend, before anything is stored, recorded or started. (The AWS Dispatcher lists S3 sources instead:
// test/aws/s3-input-store.test.ts and test/aws/aws-e2e.test.ts.)
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { directFront, fixtureLibrary, graphFor, prepareFixtureLibrary, setupDispatcher } from './rest-contract.js';

describe('text source paths at submission', () => {
  beforeAll(prepareFixtureLibrary);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('refuses an s3:// source on the embedded cluster with a 400 saying S3 sources need the AWS backend; nothing is stored or started', async () => {
    const { call, jobStore, blobStore, started } = await setupDispatcher(directFront, cleanups);
    const body = {
      jobGraph: await graphFor('s3-source', 'default', ['s3://some-bucket/in/2024', '/tmp/floe-never-written']),
      library: Buffer.from(fixtureLibrary().library).toString('base64'),
    };
    const res = await call('POST', '/jobs', body);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe(
      "text source 's3://some-bucket/in/2024': S3 sources need the AWS backend (a cluster deployed with the CDK app, FLOE_BACKEND=aws); " +
        'this embedded cluster reads its own filesystem only: copy the objects to a local folder and read that',
    );
    expect(await jobStore.list()).toEqual([]);
    expect(await blobStore.list('')).toEqual([]);
    expect(started).toEqual([]);
  });
});
