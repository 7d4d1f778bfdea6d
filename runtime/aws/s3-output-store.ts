// OutputStore on S3 for `s3://bucket/prefix` sink targets: attempts stage under
// `<prefix>/.floe-staging-<jobId>/<attemptId>/part-<i>`; a commit copies the finished attempts' parts to
// `<prefix>/part-<i>`, removes other `part-*` objects and then the staging objects.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { CopyObjectCommand, DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { InvalidRequestError } from '../core/errors.js';
import { attemptStagingLocationFor, type OutputStore } from '../blob/output-store.js';
import { AwsEnv } from './aws-services.js';
import { createS3Client } from './clients.js';

export interface S3Location {
  readonly bucket: string;
  /** Key prefix without a trailing slash; '' for the bucket's root. */
  readonly prefix: string;
}

export function parseS3Uri(uri: string): S3Location {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(uri);
  if (m === null) throw new InvalidRequestError(`'${uri}' is not an S3 URI; expected s3://<bucket>/<prefix>`);
  return { bucket: m[1]!, prefix: (m[2] ?? '').replace(/\/+$/, '') };
}

const join = (prefix: string, rest: string): string => (prefix === '' ? rest : `${prefix}/${rest}`);
const PART = /(^|\/)part-\d+$/;

export class S3OutputStore implements OutputStore {
  readonly remote = true;

  constructor(private readonly s3: S3Client) {}

  attemptStagingLocation(target: string, jobId: string, attemptId: string): string {
    parseS3Uri(target);
    return attemptStagingLocationFor(target, jobId, attemptId);
  }

  async uploadPart(stagingLocation: string, subtaskIndex: number, localPath: string): Promise<void> {
    const { bucket, prefix } = parseS3Uri(stagingLocation);
    const size = (await stat(localPath)).size;
    // lib-storage switches to a multipart upload past 5 MiB, so a large part never sits in memory whole.
    await new Upload({ client: this.s3, params: { Bucket: bucket, Key: join(prefix, `part-${subtaskIndex}`), Body: size === 0 ? '' : createReadStream(localPath), ContentType: 'text/plain; charset=utf-8' } }).done();
  }

  async commit(target: string, jobId: string, finishedAttempts: readonly string[]): Promise<void> {
    const { bucket, prefix } = parseS3Uri(target);
    const staging = join(prefix, `.floe-staging-${jobId}/`);
    const staged = new Set(await this.list(bucket, staging));
    const written = new Set<string>();
    for (const [subtask, attemptId] of finishedAttempts.entries()) {
      const from = `${staging}${attemptId}/part-${subtask}`;
      if (!staged.has(from)) continue;
      const to = join(prefix, `part-${subtask}`);
      await this.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: to, CopySource: `${bucket}/${encodeURIComponent(from).replace(/%2F/g, '/')}` }));
      written.add(to);
    }
    // The target is replaced as a whole: parts of an earlier, wider run must not linger.
    const existing = await this.list(bucket, prefix === '' ? '' : `${prefix}/`);
    const stale = existing.filter((k) => PART.test(k) && !written.has(k) && !k.startsWith(staging) && k.slice(prefix === '' ? 0 : prefix.length + 1).indexOf('/') === -1);
    await this.deleteKeys(bucket, stale);
    await this.deleteKeys(bucket, [...staged]);
  }

  async discard(target: string, jobId: string): Promise<void> {
    const { bucket, prefix } = parseS3Uri(target);
    await this.deleteKeys(bucket, await this.list(bucket, join(prefix, `.floe-staging-${jobId}/`)));
  }

  private async list(bucket: string, prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token !== undefined ? { ContinuationToken: token } : {}) }));
      for (const o of page.Contents ?? []) if (o.Key !== undefined) keys.push(o.Key);
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return keys;
  }

  private async deleteKeys(bucket: string, keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      await this.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
    }
  }
}

/** Region, endpoint and credentials as the AWS services read them (FLOE_AWS_REGION, FLOE_S3_ENDPOINT / FLOE_AWS_ENDPOINT, AWS_*). */
export function s3OutputStoreFromEnv(env: NodeJS.ProcessEnv): S3OutputStore {
  const region = env[AwsEnv.REGION] || env['AWS_REGION'] || 'us-east-1';
  const endpoint = env[AwsEnv.S3_ENDPOINT] || env[AwsEnv.ENDPOINT];
  return new S3OutputStore(createS3Client({ region, ...(endpoint ? { endpoint } : {}) }));
}
