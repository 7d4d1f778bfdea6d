// Checkpoint storage on S3 (s3rver, or FLOE_TEST_AWS_ENDPOINT), through the 's3' file system a process
// registers: the CheckpointStorage contract, entropy-injected keys included.
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, vi } from 'vitest';
import { createS3Client } from '../../runtime/aws/clients.js';
import { describeCheckpointStorageContract } from '../contracts/checkpoint-storage.contract.js';
import { startEmulators, type Emulators } from '../aws/emulators.js';

let emulators: Emulators;
let s3: S3Client;
let n = 0;
const base = `checkpoints-${Date.now().toString(36)}`;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  s3 = createS3Client(emulators.awsConfig('s3'));
  // The registered 's3' file system makes its client from the process's settings, as a TaskExecutor does.
  vi.stubEnv('FLOE_AWS_REGION', emulators.region);
  vi.stubEnv('FLOE_S3_ENDPOINT', emulators.endpoints.s3);
  vi.stubEnv('AWS_ACCESS_KEY_ID', emulators.credentials.accessKeyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', emulators.credentials.secretAccessKey);
  if (emulators.credentials.sessionToken !== undefined) vi.stubEnv('AWS_SESSION_TOKEN', emulators.credentials.sessionToken);
}, 60_000);

afterAll(async () => {
  vi.unstubAllEnvs();
  s3?.destroy();
  await emulators?.stop();
});

async function keysUnder(prefix: string): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: emulators.bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
    out.push(...(page.Contents ?? []).map((o) => o.Key!));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  return out.sort();
}

describeCheckpointStorageContract('S3', {
  newRoot: () => `s3://${emulators.bucket}/${base}/root-${n++}`,
  files: async (root) => {
    const prefix = root.slice(`s3://${emulators.bucket}/`.length);
    return (await keysUnder(`${prefix}/`)).map((k) => `s3://${emulators.bucket}/${k}`);
  },
});
