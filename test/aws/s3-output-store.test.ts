// The S3 OutputStore on s3rver: staged parts reach the target only on commit, which replaces the target
// as a whole; a discard (failed or canceled job) leaves the target as it was.
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createS3Client } from '../../runtime/aws/clients.js';
import { parseS3Uri, S3OutputStore } from '../../runtime/aws/s3-output-store.js';
import { attemptStagingLocationFor } from '../../runtime/blob/output-store.js';
import { startEmulators, type Emulators } from './emulators.js';

let emulators: Emulators;
let s3: S3Client;
let store: S3OutputStore;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  s3 = createS3Client(emulators.awsConfig('s3'));
  store = new S3OutputStore(s3);
  dir = mkdtempSync(join(tmpdir(), 'floe-s3-output-'));
});

afterAll(async () => {
  s3?.destroy();
  await emulators?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function keys(prefix: string): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: prefix }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}
const text = async (key: string): Promise<string> => (await (await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: key }))).Body!.transformToString());

async function stage(target: string, jobId: string, attempt: string, subtask: number, content: string): Promise<void> {
  const local = join(dir, `${attempt}-${subtask}`);
  writeFileSync(local, content);
  await store.uploadPart(store.attemptStagingLocation(target, jobId, attempt), subtask, local);
}

describe('S3OutputStore', () => {
  it('parses targets and names staging locations under the target prefix', () => {
    expect(parseS3Uri('s3://my-bucket/a/b/')).toEqual({ bucket: 'my-bucket', prefix: 'a/b' });
    expect(parseS3Uri('s3://my-bucket')).toEqual({ bucket: 'my-bucket', prefix: '' });
    expect(() => parseS3Uri('s3://X/y')).toThrow(/not an S3 URI/);
    expect(attemptStagingLocationFor('s3://b-1/out', 'job1', 'att-1')).toBe('s3://b-1/out/.floe-staging-job1/att-1');
    expect(attemptStagingLocationFor('/tmp/out', 'job1', 'att-1')).toBe('/tmp/.out.staging-job1/att-1');
  });

  it('commits the finished attempts\' parts, replacing the target as a whole, and removes the staging', async () => {
    const target = `s3://${emulators.bucket}/commit/out`;
    await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'commit/out/part-5', Body: 'old\n' }));
    await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'commit/out/keep.txt', Body: 'not a part\n' }));
    await stage(target, 'j1', 'a0', 0, 'zero\n');
    await stage(target, 'j1', 'a1-failed', 1, 'from a failed attempt\n');
    await stage(target, 'j1', 'a1', 1, 'one\n');
    await store.commit(target, 'j1', 'overwrite', ['a0', 'a1']);
    expect(await keys('commit/')).toEqual(['commit/out/keep.txt', 'commit/out/part-0', 'commit/out/part-1']);
    expect(await text('commit/out/part-0')).toBe('zero\n');
    expect(await text('commit/out/part-1')).toBe('one\n');
  });

  it('leaves the target untouched when the job is discarded', async () => {
    const target = `s3://${emulators.bucket}/discard/out`;
    await s3.send(new PutObjectCommand({ Bucket: emulators.bucket, Key: 'discard/out/part-0', Body: 'previous\n' }));
    await stage(target, 'j2', 'a0', 0, 'new\n');
    await store.discard(target, 'j2');
    expect(await keys('discard/')).toEqual(['discard/out/part-0']);
    expect(await text('discard/out/part-0')).toBe('previous\n');
  });
});
