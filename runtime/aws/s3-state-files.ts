// Checkpoint files on S3 (`s3://bucket/key`): each file one PUT (an object appears whole or not at all),
// ranged GETs for the key groups a restore needs, folders deleted by listing their prefix.
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { StateFileNotFoundError, type StateFileStore } from '../blob/state-files.js';
import { InvalidRequestError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';
import { createS3Client, type AwsCredentials } from './clients.js';
import { staticCredentials } from './s3-output-store.js';

/** The calls of the S3 client this store makes (a client, or one that strikes a fault in a test). */
export type S3Sender = Pick<S3Client, 'send'>;

function parse(uri: string): { readonly bucket: string; readonly key: string } {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.+)$/.exec(uri);
  if (m === null) throw new InvalidRequestError(`'${uri}' is not the URI of an S3 object or prefix; expected s3://<bucket>/<key>`);
  return { bucket: m[1]!, key: m[2]! };
}

const isMissing = (error: unknown): boolean => {
  const name = (error as { name?: string }).name;
  return name === 'NoSuchKey' || name === 'NotFound' || (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404;
};

export class S3StateFileStore implements StateFileStore {
  constructor(private readonly s3: S3Sender) {}

  async write(uri: string, bytes: Uint8Array): Promise<void> {
    const { bucket, key } = parse(uri);
    await this.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.byteLength }));
  }

  /** One object of the parts joined (a multipart upload per run of parts would spare the joined buffer). */
  writeParts(uri: string, parts: readonly Uint8Array[]): Promise<void> {
    return this.write(uri, parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  async read(uri: string, range?: { readonly offset: number; readonly length: number }): Promise<Uint8Array> {
    if (range !== undefined && range.length === 0) return new Uint8Array(0);
    const { bucket, key } = parse(uri);
    try {
      const res = await this.s3.send(
        new GetObjectCommand({
          Bucket: bucket,
          Key: key,
          ...(range !== undefined ? { Range: `bytes=${range.offset}-${range.offset + range.length - 1}` } : {}),
        }),
      );
      return await res.Body!.transformToByteArray();
    } catch (error) {
      if (isMissing(error)) throw new StateFileNotFoundError(uri, { cause: error });
      throw error;
    }
  }

  async delete(uris: readonly string[]): Promise<void> {
    const byBucket = new Map<string, string[]>();
    for (const uri of uris) {
      const { bucket, key } = parse(uri);
      byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), key]);
    }
    for (const [bucket, keys] of byBucket) await this.deleteKeys(bucket, keys);
  }

  async deleteFolder(uri: string): Promise<void> {
    const { bucket, key } = parse(uri);
    await this.deleteKeys(bucket, await this.keysUnder(bucket, `${key.replace(/\/+$/, '')}/`));
  }

  /** `uri`: a prefix, or the bucket itself (`s3://bucket/`). */
  async list(uri: string): Promise<string[]> {
    const root = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/?$/.exec(uri);
    const { bucket, key } = root !== null ? { bucket: root[1]!, key: '' } : parse(uri);
    const prefix = key.replace(/\/+$/, '');
    return (await this.keysUnder(bucket, prefix === '' ? '' : `${prefix}/`)).map((k) => `s3://${bucket}/${k}`);
  }

  private async keysUnder(bucket: string, prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token !== undefined ? { ContinuationToken: token } : {}) }),
      );
      keys.push(...(page.Contents ?? []).map((o) => o.Key!));
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return keys.sort();
  }

  private async deleteKeys(bucket: string, keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const res = await this.s3.send(
        new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }),
      );
      const failed = res.Errors ?? [];
      if (failed.length > 0) {
        throw new Error(
          `S3 did not delete ${failed.length} checkpoint file(s) in bucket '${bucket}', e.g. '${failed[0]!.Key}': ${failed[0]!.Code} ${failed[0]!.Message}`,
        );
      }
    }
  }
}

/** The store of this process's S3 settings (FLOE_AWS_REGION, FLOE_S3_ENDPOINT), with `credentials` when given. */
export function s3StateFileStoreFromEnv(env: NodeJS.ProcessEnv, credentials?: AwsCredentials): S3StateFileStore {
  const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'] || 'us-east-1';
  const endpoint = env[FloeEnv.S3_ENDPOINT] || env[FloeEnv.AWS_ENDPOINT];
  return new S3StateFileStore(
    createS3Client({ region, ...(endpoint ? { endpoint } : {}), ...(credentials !== undefined ? { credentials: staticCredentials(credentials) } : {}) }),
  );
}
