// The S3 OutputStore on s3rver: the OutputStore contract, and the reader's view of a commit, where the
// manifest `_SUCCESS`, written last, is the commit point.
import { CopyObjectCommand, GetObjectCommand, GetObjectTaggingCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createS3Client } from '../../runtime/aws/clients.js';
import { parseS3Uri, S3OutputStore, type S3Sender } from '../../runtime/aws/s3-output-store.js';
import { attemptStagingLocationFor } from '../../runtime/blob/file-systems.js';
import { OUTPUT_MANIFEST, parseManifest } from '../../runtime/blob/output-store.js';
import { STAGED_TAG } from '../../runtime/blob/output-rules.js';
import { describeOutputStoreContract, type OutputStoreHarness } from '../contracts/output-store.contract.js';
import { startEmulators, type Emulators } from './emulators.js';

let emulators: Emulators;
let s3: S3Client;
let dir: string;
let n = 0;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  s3 = createS3Client(emulators.awsConfig('s3'));
  dir = mkdtempSync(join(tmpdir(), 'floe-s3-output-'));
});

afterAll(async () => {
  s3?.destroy();
  await emulators?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const bucket = (): string => emulators.bucket;
const keyOf = (target: string, name: string): string => `${parseS3Uri(target).prefix}/${name}`;

async function keys(prefix: string): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket(), Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
    out.push(...(page.Contents ?? []).map((o) => o.Key!));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  return out.sort();
}

async function text(key: string): Promise<string | undefined> {
  try {
    return await (await s3.send(new GetObjectCommand({ Bucket: bucket(), Key: key }))).Body!.transformToString();
  } catch (error) {
    if ((error as { name?: string }).name === 'NoSuchKey') return undefined;
    throw error;
  }
}

/** The emulator's client, except that the `failAt`-th CopyObject (a part moving into place) throws once. */
function failingAtCopy(failAt: number): S3Sender {
  let copies = 0;
  return {
    send: ((command: unknown, ...rest: unknown[]) => {
      if (command instanceof CopyObjectCommand && ++copies === failAt)
        return Promise.reject(Object.assign(new Error('simulated crash before a copy'), { name: 'SimulatedCrash' }));
      return (s3.send as (...a: unknown[]) => Promise<unknown>)(command, ...rest);
    }) as S3Sender['send'],
  };
}

function harness(): OutputStoreHarness {
  const base = `contract-${Date.now().toString(36)}-${n++}`;
  return {
    store: new S3OutputStore(s3),
    newTarget: (name) => `s3://${bucket()}/${base}/${name}`,
    async putFile(target, name, body) {
      await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: keyOf(target, name), Body: body }));
    },
    async makeFile(target, body) {
      await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: parseS3Uri(target).prefix, Body: body }));
    },
    readFile: async (target, name) => (await text(keyOf(target, name))) ?? '',
    list: async (target) => {
      const base = `${parseS3Uri(target).prefix}/`;
      return (await keys(base)).map((k) => k.slice(base.length)).filter((k) => !k.startsWith('.floe-staging-'));
    },
    stagingLeft: async (target, jobId) => keys(`${parseS3Uri(target).prefix}/.floe-staging-${jobId}/`),
    storeFailingAtPartMove: (failAt) => new S3OutputStore(failingAtCopy(failAt)),
    async overwriteStagedPart(target, jobId, attemptId, subtask, body) {
      const { prefix } = parseS3Uri(attemptStagingLocationFor(target, jobId, attemptId));
      await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: `${prefix}/part-${subtask}`, Body: body }));
    },
  };
}

describeOutputStoreContract('S3OutputStore', harness);

describe('S3OutputStore', () => {
  it('parses targets and names staging locations under the target prefix', () => {
    expect(parseS3Uri('s3://my-bucket/a/b/')).toEqual({ bucket: 'my-bucket', prefix: 'a/b' });
    expect(parseS3Uri('s3://my-bucket')).toEqual({ bucket: 'my-bucket', prefix: '' });
    expect(() => parseS3Uri('s3://X/y')).toThrow(/not an S3 URI/);
    expect(attemptStagingLocationFor('s3://b-1/out', 'job1', 'att-1')).toBe('s3://b-1/out/.floe-staging-job1/att-1');
    expect(attemptStagingLocationFor('/tmp/out', 'job1', 'att-1')).toBe('/tmp/.out.staging-job1/att-1');
  });

  it('shows a reader that reads the manifest, then the files it lists, then the manifest again, only whole outputs', async () => {
    const store = new S3OutputStore(s3);
    const target = `s3://${bucket()}/polled-${Date.now().toString(36)}/out`;
    const prefix = parseS3Uri(target).prefix;
    const stage = async (jobId: string, count: number): Promise<string[]> => {
      const attempts: string[] = [];
      for (let i = 0; i < count; i++) {
        const local = join(dir, `${jobId}-${i}`);
        writeFileSync(local, `${jobId} part ${i}\n`);
        await store.uploadPart(store.attemptStagingLocation(target, jobId, `${jobId}-a${i}`), i, local);
        attempts.push(`${jobId}-a${i}`);
      }
      return attempts;
    };
    await store.commit(target, 'old', 'no-overwrite', await stage('old', 6));
    const attempts = await stage('new', 4);

    const views = new Map<string, number>();
    let done = false;
    const reader = (async () => {
      while (!done) {
        const before = await text(`${prefix}/${OUTPUT_MANIFEST}`);
        const manifest = before === undefined ? undefined : parseManifest(before);
        if (manifest === undefined) {
          views.set('not ready', (views.get('not ready') ?? 0) + 1);
          continue;
        }
        const parts = await Promise.all(manifest.files.map((f) => text(`${prefix}/${f}`)));
        // A commit that began meanwhile withdrew or replaced the manifest: this read does not count.
        if ((await text(`${prefix}/${OUTPUT_MANIFEST}`)) !== before) continue;
        parts.forEach((p, i) => expect(p, `${manifest.files[i]} of job ${manifest.jobId}`).toBe(`${manifest.jobId} part ${i}\n`));
        views.set(manifest.jobId, (views.get(manifest.jobId) ?? 0) + 1);
      }
    })();
    try {
      await store.commit(target, 'new', 'overwrite', attempts);
    } finally {
      done = true;
      await reader;
    }
    expect(views.get('old') ?? 0).toBeGreaterThan(0);
    expect(await keys(`${prefix}/`)).toEqual([`${prefix}/${OUTPUT_MANIFEST}`, ...[0, 1, 2, 3].map((i) => `${prefix}/part-${i}`)]);
    expect(parseManifest((await text(`${prefix}/${OUTPUT_MANIFEST}`))!)).toMatchObject({ jobId: 'new', files: ['part-0', 'part-1', 'part-2', 'part-3'] });
  });

  it('tags what it stages (so a lifecycle rule expires what no job commits), and the committed output carries no tag', async () => {
    const store = new S3OutputStore(s3);
    const target = `s3://${bucket()}/tagged-${Date.now().toString(36)}/out`;
    const { prefix } = parseS3Uri(target);
    const local = join(dir, 'tagged-part');
    writeFileSync(local, 'a part\n');
    const staging = store.attemptStagingLocation(target, 'tagged', 't0');
    await store.uploadPart(staging, 0, local);
    const tagsOf = async (key: string) => (await s3.send(new GetObjectTaggingCommand({ Bucket: bucket(), Key: key }))).TagSet ?? [];
    const staged = (await keys(`${prefix}/`)).filter((k) => k.includes('.floe-staging-'));
    expect(staged).toHaveLength(1);
    expect(await tagsOf(staged[0]!)).toEqual([{ Key: STAGED_TAG.Key, Value: STAGED_TAG.Value }]);
    await store.commit(target, 'tagged', 'no-overwrite', ['t0']);
    expect(await keys(`${prefix}/`)).toEqual([`${prefix}/${OUTPUT_MANIFEST}`, `${prefix}/part-0`]);
    expect(await tagsOf(`${prefix}/part-0`)).toEqual([]);
    expect(await tagsOf(`${prefix}/${OUTPUT_MANIFEST}`)).toEqual([]);
  });

  it("refuses job B's part that another job replaced with bytes of the same size after B's task reported it (its ETag differs), and publishes none of B's output", async () => {
    const store = new S3OutputStore(s3);
    const target = `s3://${bucket()}/replaced-${Date.now().toString(36)}/out`;
    const { prefix } = parseS3Uri(target);
    const local = join(dir, 'job-b-part');
    writeFileSync(local, 'B counted 42\n');
    const location = store.attemptStagingLocation(target, 'job-b', 'b0');
    const reported = await store.uploadPart(location, 0, local);
    expect(reported.size).toBe(13);
    expect(reported.etag).toMatch(/^"[0-9a-f]{32}"$/);
    // Job A writes B's staging key, keeping the size: only the ETag tells the bytes apart.
    await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: `${parseS3Uri(location).prefix}/part-0`, Body: 'A says 666!!\n' }));
    await expect(store.commit(target, 'job-b', 'no-overwrite', ['b0'], [reported])).rejects.toThrow(
      new RegExp(
        `part file of subtask 0 \\(attempt b0\\) at 's3://${bucket()}/${prefix}/\\.floe-staging-job-b/b0/part-0' was changed after its task finished: its task reported 13 bytes with ETag ${reported.etag}, found 13 bytes with ETag "[0-9a-f]{32}"`,
      ),
    );
    expect(await keys(`${prefix}/`)).toEqual([`${prefix}/.floe-staging-job-b/_commit.json`, `${prefix}/.floe-staging-job-b/b0/part-0`]);
    expect(await text(`${prefix}/part-0`)).toBeUndefined();
    expect(await text(`${prefix}/${OUTPUT_MANIFEST}`)).toBeUndefined();
  });

  it("refuses a journal naming a file that is no part (one the job's own tasks could have written there), and deletes nothing", async () => {
    const store = new S3OutputStore(s3);
    const target = `s3://${bucket()}/journal-${Date.now().toString(36)}/out`;
    const { prefix } = parseS3Uri(target);
    const local = join(dir, 'journal-part');
    writeFileSync(local, 'mine\n');
    await store.uploadPart(store.attemptStagingLocation(target, 'j-bad', 'a0'), 0, local);
    await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: `${prefix}/precious.txt`, Body: 'keep me\n' }));
    const journal = {
      format: 1,
      jobId: 'j-bad',
      target,
      writeMode: 'overwrite',
      parts: [{ subtask: 0, attemptId: 'a0', file: 'part-0' }],
      previousFiles: ['precious.txt'],
    };
    await s3.send(new PutObjectCommand({ Bucket: bucket(), Key: `${prefix}/.floe-staging-j-bad/_commit.json`, Body: JSON.stringify(journal) }));
    await expect(store.commit(target, 'j-bad', 'overwrite', ['a0'])).rejects.toMatchObject({ code: 'COMMIT_JOURNAL' });
    expect(await text(`${prefix}/precious.txt`)).toBe('keep me\n');
    expect(await text(`${prefix}/part-0`)).toBeUndefined();
  });

  it('ignores the staging areas of other jobs under the prefix, and never deletes them', async () => {
    const store = new S3OutputStore(s3);
    const target = `s3://${bucket()}/others-${Date.now().toString(36)}/out`;
    const prefix = parseS3Uri(target).prefix;
    const local = join(dir, 'other');
    writeFileSync(local, 'other job\n');
    await store.uploadPart(store.attemptStagingLocation(target, 'other-job', 'x0'), 0, local);
    await store.checkTarget(target, 'no-overwrite', 'mine');
    await store.uploadPart(store.attemptStagingLocation(target, 'mine', 'm0'), 0, local);
    await store.commit(target, 'mine', 'no-overwrite', ['m0']);
    expect(await keys(`${prefix}/.floe-staging-other-job/`)).toEqual([`${prefix}/.floe-staging-other-job/x0/part-0`]);
  });
});
