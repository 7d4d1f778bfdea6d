// The S3 InputStore on s3rver (or FLOE_TEST_AWS_ENDPOINT): the contract, and what only S3 has — keys
// versus prefixes, folder markers, objects below sub-prefixes, ranged reads, buckets that do not exist or
// may not be read — and the Dispatcher's check of source paths at submission.
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createS3Client } from '../../runtime/aws/clients.js';
import { S3InputStore } from '../../runtime/aws/s3-input-store.js';
import type { S3Sender } from '../../runtime/aws/s3-output-store.js';
import { checkSourcePaths, embeddedSourceCheck } from '../../runtime/blob/submission-checks.js';
import { InputSourceError } from '../../runtime/core/errors.js';
import { createSplits } from '../../runtime/jobmaster/input-splits.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { readSplitLines } from '../../runtime/task/text-file-reader.js';
import { describeInputStoreContract, readAllLines, type InputStoreHarness } from '../contracts/input-store.contract.js';
import { startEmulators, uniqueName, type Emulators } from './emulators.js';

let emulators: Emulators;
let s3: S3Client;
let n = 0;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  s3 = createS3Client(emulators.awsConfig('s3'));
});

afterAll(async () => {
  s3?.destroy();
  await emulators?.stop();
});

const bucket = (): string => emulators.bucket;
const put = (key: string, body: string | Uint8Array): Promise<unknown> =>
  s3.send(new PutObjectCommand({ Bucket: bucket(), Key: key, Body: Buffer.from(body) }));

function harness(): InputStoreHarness {
  const base = `in-${n++}`;
  return {
    store: new S3InputStore(s3),
    newFolder: (name) => `s3://${bucket()}/${base}/${name}`,
    async putFile(folder, name, bytes) {
      await put(`${folder.slice(`s3://${bucket()}/`.length)}/${name}`, bytes);
    },
  };
}

describeInputStoreContract('S3InputStore', harness);

/** The emulator's client, noting the Range of every GetObject. */
function recordingRanges(): { sender: S3Sender; ranges: string[] } {
  const ranges: string[] = [];
  return {
    ranges,
    sender: {
      send: ((command: unknown, ...rest: unknown[]) => {
        if (command instanceof GetObjectCommand) ranges.push(command.input.Range ?? 'whole object');
        return (s3.send as (...a: unknown[]) => Promise<unknown>)(command, ...rest);
      }) as S3Sender['send'],
    },
  };
}

/** The emulator's client, except that every call answers as S3 does to a role without the permission. */
const denying: S3Sender = {
  send: (() => Promise.reject(Object.assign(new Error('Access Denied'), { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } }))) as S3Sender['send'],
};

describe('S3InputStore on S3', () => {
  it('reads a key as one object, and a prefix as every object below it in key order, without folder markers', async () => {
    const store = new S3InputStore(s3);
    await put('tree/logs/2024/b.txt', 'b\n');
    await put('tree/logs/2024/', '');
    await put('tree/logs/a.txt', 'a\n');
    await put('tree/logs/2024/.floe-staging-x/part-0', 'staged\n');
    await put('tree/logs/c/_SUCCESS', '{}');
    await put('tree/logsbook.txt', 'not below the prefix\n');
    const uri = `s3://${bucket()}/tree/logs`;
    const sizes = (files: { path: string; size: number }[]): { path: string; size: number }[] => files.map(({ path, size }) => ({ path, size }));
    expect(sizes(await store.listFiles(uri))).toEqual([
      { path: `${uri}/2024/b.txt`, size: 2 },
      { path: `${uri}/a.txt`, size: 2 },
    ]);
    expect(await readAllLines(store, uri, 1)).toEqual(['b', 'a']);
    // A trailing '/' names the same prefix; a key names just its object.
    expect(sizes(await store.listFiles(`${uri}/a.txt`))).toEqual([{ path: `${uri}/a.txt`, size: 2 }]);
    // An empty object named like the prefix is a folder marker too.
    await put('tree/logs', '');
    expect((await store.listFiles(uri)).map((f) => f.path)).toEqual([`${uri}/2024/b.txt`, `${uri}/a.txt`]);
  });

  it('reads each split with ranged GETs: its own range (from the byte before it), then small ranges past its end to finish its last line', async () => {
    const text = Array.from({ length: 400 }, (_, i) => `line ${i} ${'w'.repeat(i % 31)}`).join('\n') + '\n';
    await put('ranged/words.txt', text);
    const { sender, ranges } = recordingRanges();
    const store = new S3InputStore(sender);
    const splits = createSplits(await store.listFiles(`s3://${bucket()}/ranged/words.txt`), 1000);
    expect(splits.length).toBeGreaterThan(5);
    const lines: string[] = [];
    for (const split of splits) {
      const before = ranges.length;
      for await (const line of readSplitLines(split, { store })) lines.push(line);
      const first = ranges[before];
      expect(first).toBe(`bytes=${Math.max(0, split.start - 1)}-${split.start + split.length - 1}`);
      // A split ending inside a line asks for the next bytes, 4 KiB first; one ending with a line, or the
      // file, needs nothing more.
      const end = split.start + split.length;
      const more = ranges.slice(before + 1);
      if (end === text.length || text[end - 1] === '\n') expect(more).toEqual([]);
      else expect(more).toEqual([`bytes=${end}-${end + 4095}`]);
    }
    expect(lines).toEqual(text.slice(0, -1).split('\n'));
    expect(ranges.every((r) => r.startsWith('bytes='))).toBe(true);
  });

  it('fails a split whose object went after the listing, naming the object and the split', async () => {
    await put('gone/x.txt', 'one\ntwo\n');
    const store = new S3InputStore(s3);
    const [split] = createSplits(await store.listFiles(`s3://${bucket()}/gone`), 100);
    await s3.send(new DeleteObjectCommand({ Bucket: bucket(), Key: 'gone/x.txt' }));
    const read = (async () => {
      for await (const line of readSplitLines(split!, { store })) void line;
    })();
    await expect(read).rejects.toThrow(
      new RegExp(`text source cannot read split 0 of 's3://${bucket()}/gone/x\\.txt' \\(bytes 0-8\\): GetObject bytes=0-7 failed: NoSuchKey`),
    );
  });

  it('refuses a path that names no object, a bucket that does not exist and a path it may not read, saying why', async () => {
    const store = new S3InputStore(s3);
    await expect(store.listFiles(`s3://${bucket()}/nowhere`)).rejects.toThrow(
      new InputSourceError(
        `text source 's3://${bucket()}/nowhere' names no objects: there is no object 'nowhere' in bucket '${bucket()}' and none under 'nowhere/'; check the path (a prefix is read as a folder)`,
      ),
    );
    // A monitored prefix may have no objects yet: with allowEmpty it lists as none.
    expect(await store.listFiles(`s3://${bucket()}/nowhere`, { allowEmpty: true })).toEqual([]);
    const absent = uniqueName('floe-absent');
    await expect(store.listFiles(`s3://${absent}/in`)).rejects.toThrow(
      new InputSourceError(`text source 's3://${absent}/in': the bucket '${absent}' does not exist (NoSuchBucket); check the path`),
    );
    const denied = await new S3InputStore(denying).listFiles(`s3://${bucket()}/in`).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(denied).toBeInstanceOf(InputSourceError);
    expect((denied as Error).message).toBe(
      `text source 's3://${bucket()}/in': access denied (AccessDenied (HTTP 403): Access Denied); this cluster may not list or read it: grant it with FloeCluster.grantBucketAccess`,
    );
  });

  it('lets the Dispatcher refuse a job at submission naming every source it cannot read; the embedded cluster refuses S3 sources', async () => {
    await put('check/ok.txt', 'fine\n');
    const graph = (paths: string[]): JobGraph =>
      ({
        vertices: [
          {
            id: 'v',
            name: 'read',
            parallelism: 1,
            operators: paths.map((path, i) => ({ kind: 'source.textFile', id: `s${i}`, name: `read${i}`, path, splitSizeBytes: 100 })),
          },
        ],
      }) as unknown as JobGraph;
    const store = new S3InputStore(s3);
    const ok = `s3://${bucket()}/check/ok.txt`;
    await expect(
      checkSourcePaths(graph([ok, '/local/left/to/the/jobmaster']), 5_000, async (p) => (p.startsWith('s3://') ? store : undefined)),
    ).resolves.toBeUndefined();
    const missing = `s3://${bucket()}/check/missing`;
    const refused = await checkSourcePaths(graph([ok, missing]), 5_000, async () => store).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(InputSourceError);
    expect((refused as InputSourceError).httpStatus).toBe(400);
    expect((refused as Error).message).toContain(`text source '${missing}' names no objects`);
    await expect(checkSourcePaths(graph([ok]), 5_000, embeddedSourceCheck)).rejects.toThrow(`text source '${ok}': S3 sources need the AWS backend`);
    await expect(checkSourcePaths(graph(['/local/in.txt']), 5_000, embeddedSourceCheck)).rejects.toThrow("text source: '/local/in.txt' does not exist");
  });
});
