// The BlobStore contract on S3 (s3rver, or FLOE_TEST_AWS_ENDPOINT), plus multipart uploads, key
// prefixes, listing across pages, and errors that name the bucket.
import { randomBytes } from 'node:crypto';
import { GetObjectCommand, HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsRequestError } from '../../runtime/aws/aws-errors.js';
import { createS3Client } from '../../runtime/aws/clients.js';
import { S3BlobStore } from '../../runtime/aws/s3-blob-store.js';
import { sha256Hex } from '../../runtime/blob/blob-store.js';
import { describeBlobStoreContract } from '../contracts/blob-store.contract.js';
import { createBucket, startEmulators, type Emulators } from './emulators.js';

const MiB = 1024 * 1024;
let emulators: Emulators;
let s3: S3Client;
/** Names of the S3 commands sent through `s3`, in order. */
const sent: string[] = [];

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  s3 = createS3Client(emulators.awsConfig('s3'));
  s3.middlewareStack.add(
    (next, context) => (args) => {
      sent.push(context.commandName ?? '?');
      return next(args);
    },
    { step: 'initialize', name: 'recordCommands' },
  );
});
afterAll(async () => {
  s3?.destroy();
  await emulators?.stop();
});

describeBlobStoreContract('S3BlobStore', async () => new S3BlobStore({ client: s3, bucket: emulators.bucket }));
// Under a prefix and with tiny list pages, as a deployment sharing its bucket would run.
describeBlobStoreContract(
  'S3BlobStore (prefix, 2 keys per list page)',
  async () => new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'tenant-a/', listPageSize: 2 }),
);

describe('S3BlobStore specifics', () => {
  it('uploads a blob above the part size in parts and reads it back byte for byte', async () => {
    const store = new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'multipart/', multipartPartSizeBytes: 5 * MiB });
    const data = new Uint8Array(randomBytes(11 * MiB + 7));
    sent.length = 0;
    await store.put('big.bin', data);
    expect(sent.filter((c) => c === 'CreateMultipartUploadCommand')).toHaveLength(1);
    expect(sent.filter((c) => c === 'UploadPartCommand')).toHaveLength(3);
    expect(sent.filter((c) => c === 'CompleteMultipartUploadCommand')).toHaveLength(1);
    expect(sent).not.toContain('PutObjectCommand');
    const got = await store.get('big.bin');
    expect(got?.byteLength).toBe(data.byteLength);
    expect(Buffer.from(got!).equals(Buffer.from(data))).toBe(true);
    expect(await store.list('')).toEqual(['big.bin']);
  });

  it('sends a blob up to the part size as one PUT', async () => {
    const store = new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'single/', multipartPartSizeBytes: 5 * MiB });
    const data = new Uint8Array(randomBytes(5 * MiB));
    sent.length = 0;
    await store.put('edge.bin', data);
    expect(sent).toEqual(['PutObjectCommand']);
    expect(sha256Hex((await store.get('edge.bin'))!)).toBe(sha256Hex(data));
  });

  it('keeps its keys under its prefix and sees no others', async () => {
    const a = new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'iso-a/' });
    const b = new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'iso-b/' });
    await a.put('jobs/j/jobgraph.json', new TextEncoder().encode('{"a":1}'));
    expect(await b.exists('jobs/j/jobgraph.json')).toBe(false);
    expect(await b.list('')).toEqual([]);
    expect(await a.list('jobs/')).toEqual(['jobs/j/jobgraph.json']);
    const raw = await s3.send(new GetObjectCommand({ Bucket: emulators.bucket, Key: 'iso-a/jobs/j/jobgraph.json' }));
    expect(await raw.Body!.transformToString()).toBe('{"a":1}');
  });

  it('lists every key across many pages', async () => {
    const store = new S3BlobStore({ client: s3, bucket: emulators.bucket, prefix: 'pages/', listPageSize: 3 });
    const keys = Array.from({ length: 10 }, (_, i) => `k/${String(i).padStart(2, '0')}`);
    await Promise.all(keys.map((k) => store.put(k, new Uint8Array([1]))));
    sent.length = 0;
    expect(await store.list('k/')).toEqual(keys);
    expect(sent.filter((c) => c === 'ListObjectsV2Command')).toHaveLength(4);
  });

  it('rejects a part size below what S3 accepts, and keys that are empty or absolute', async () => {
    expect(() => new S3BlobStore({ client: s3, bucket: emulators.bucket, multipartPartSizeBytes: MiB })).toThrow(/at least 5242880/);
    const store = new S3BlobStore({ client: s3, bucket: emulators.bucket });
    await expect(store.put('', new Uint8Array(1))).rejects.toThrow(/non-empty/);
    await expect(store.get('/etc/passwd')).rejects.toThrow(/relative/);
  });

  it('fails with a permanent AwsRequestError naming a bucket that does not exist', async () => {
    const store = new S3BlobStore({ client: s3, bucket: 'floe-no-such-bucket' });
    const error = await store.put('k', new Uint8Array(1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsRequestError);
    expect((error as AwsRequestError).retryable).toBe(false);
    expect((error as Error).message).toMatch(/s3:\/\/floe-no-such-bucket\/k.*NoSuchBucket/);
    await expect(store.get('k')).rejects.toBeInstanceOf(AwsRequestError);
  });

  it('a fresh bucket from the harness starts empty', async () => {
    const bucket = await createBucket(emulators);
    expect(await new S3BlobStore({ client: s3, bucket }).list('')).toEqual([]);
  });
});

describe('the harness on an outside endpoint (FLOE_TEST_AWS_ENDPOINT)', () => {
  it('starts nothing, and empties and deletes the buckets it made when stopped', async () => {
    const names = ['FLOE_TEST_AWS_ENDPOINT', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'] as const;
    const saved = names.map((n) => process.env[n]);
    // This file's S3 endpoint stands in for the outside one (LocalStack).
    process.env['FLOE_TEST_AWS_ENDPOINT'] = emulators.endpoints.s3;
    process.env['AWS_ACCESS_KEY_ID'] = emulators.credentials.accessKeyId;
    process.env['AWS_SECRET_ACCESS_KEY'] = emulators.credentials.secretAccessKey;
    let outside: Emulators;
    try {
      outside = await startEmulators({ dynamodb: false });
    } finally {
      names.forEach((n, i) => (saved[i] === undefined ? delete process.env[n] : (process.env[n] = saved[i])));
    }
    expect(outside.external).toBe(true);
    expect(outside.endpoints).toEqual({ dynamodb: emulators.endpoints.s3, s3: emulators.endpoints.s3 });
    const extra = await createBucket(outside);
    const store = new S3BlobStore({ client: s3, bucket: outside.bucket });
    await store.put('left/behind', new Uint8Array([1, 2, 3]));
    await new S3BlobStore({ client: s3, bucket: extra }).put('also/left', new Uint8Array([4]));
    await outside.stop();
    for (const bucket of [outside.bucket, extra]) {
      const error = await s3.send(new HeadBucketCommand({ Bucket: bucket })).catch((e: unknown) => e);
      expect((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode, bucket).toBe(404);
    }
  });
});
