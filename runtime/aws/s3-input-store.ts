// InputStore on S3 for `s3://bucket/key-or-prefix` text sources. The path names one object, or (when no
// object has that key) every object under `<key>/` in key order; folder markers, names below it starting
// with '.' or '_' (staging areas, manifests) are left out. A split is read with ranged GETs: first its
// own range, then small, growing ranges past its end until its last line is complete.
import type { Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { ByteStream, InputFile, InputStore, ListFilesOptions } from '../blob/input-store.js';
import { errorMessage, FloeError, InputSourceError } from '../core/errors.js';
import { createS3Client, type AwsCredentials } from './clients.js';
import { parseS3Uri, staticCredentials, type S3Sender } from './s3-output-store.js';
import { FloeEnv } from '../core/floe-env.js';

/** The first range read past a split's end; each next one is twice as long, up to the chunk size. */
const FIRST_OVERRUN_BYTES = 4 * 1024;

const statusOf = (error: unknown): number | undefined => (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
const nameOf = (error: unknown): string => String((error as { name?: unknown })?.name ?? 'Error');
const isNotFound = (error: unknown): boolean =>
  nameOf(error) === 'NoSuchKey' || nameOf(error) === 'NotFound' || (statusOf(error) === 404 && nameOf(error) !== 'NoSuchBucket');
const isDenied = (error: unknown): boolean => nameOf(error) === 'AccessDenied' || nameOf(error) === 'Forbidden' || statusOf(error) === 403;

/** `bytes 0-99/1234` → 1234; undefined when the answer does not say. */
function totalOf(contentRange: string | undefined): number | undefined {
  const m = /\/(\d+)\s*$/.exec(contentRange ?? '');
  return m === null ? undefined : Number(m[1]);
}

export class S3InputStore implements InputStore {
  constructor(private readonly s3: S3Sender) {}

  async listFiles(path: string, options: ListFilesOptions = {}): Promise<InputFile[]> {
    const { bucket, prefix } = parseS3Uri(path);
    try {
      const head = prefix === '' ? undefined : await this.headOf(bucket, prefix);
      if (head !== undefined && head.size > 0) return [{ path, ...head }];
      const base = prefix === '' ? '' : `${prefix}/`;
      const objects = (await this.list(bucket, base)).filter(({ key }) => {
        const name = key.slice(base.length);
        // A key ending in '/' is a console-made "folder" marker, not a file.
        return name !== '' && !name.endsWith('/') && !name.split('/').some((segment) => segment.startsWith('.') || segment.startsWith('_'));
      });
      // An empty object named like a prefix with objects below it is some tools' folder marker.
      if (objects.length === 0 && head !== undefined) return [{ path, ...head }];
      if (objects.length === 0 && options.allowEmpty === true) return [];
      if (objects.length === 0) {
        throw new InputSourceError(
          `text source '${path}' names no objects: there is no object '${prefix}' in bucket '${bucket}' and none under '${base}'; check the path (a prefix is read as a folder)`,
        );
      }
      objects.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
      // Listing needs s3:ListBucket, reading s3:GetObject: one HEAD shows now that reading is allowed too.
      const first = objects.find((o) => o.size > 0);
      if (first !== undefined) await this.sizeOf(bucket, first.key);
      return objects.map(({ key, size, modifiedMs }) => ({ path: `s3://${bucket}/${key}`, size, ...(modifiedMs !== undefined ? { modifiedMs } : {}) }));
    } catch (error) {
      throw this.sourceError(path, bucket, error);
    }
  }

  read(path: string, range: { readonly start: number; readonly expectedEnd: number; readonly chunkSizeBytes: number }): ByteStream {
    const { bucket, prefix: key } = parseS3Uri(path);
    const abort = new AbortController();
    const s3 = this.s3;
    async function* ranges(): AsyncGenerator<Uint8Array> {
      let from = range.start;
      // Exclusive end of the range to ask for.
      let to = Math.max(range.expectedEnd, from + 1);
      let overrun = FIRST_OVERRUN_BYTES;
      let size: number | undefined;
      for (;;) {
        if (size !== undefined && from >= size) return;
        let res;
        try {
          res = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=${from}-${to - 1}` }), { abortSignal: abort.signal });
        } catch (error) {
          // A range starting at the end of the object: there is nothing more.
          if (nameOf(error) === 'InvalidRange' || statusOf(error) === 416) return;
          throw new FloeError('S3_GET', `GetObject bytes=${from}-${to - 1} failed: ${describe(error)}`, {
            cause: error,
            retryable: !isDenied(error) && !isNotFound(error),
          });
        }
        // An endpoint that ignored the Range would send the object from its first byte: never read that as the range.
        if (res.ContentRange === undefined && from > 0) {
          (res.Body as Readable | undefined)?.destroy();
          throw new FloeError('S3_GET', `GetObject bytes=${from}-${to - 1} answered without a Content-Range: the endpoint does not serve ranged reads`);
        }
        size = totalOf(res.ContentRange) ?? size;
        let got = 0;
        if (res.Body !== undefined) {
          for await (const chunk of res.Body as Readable) {
            got += (chunk as Uint8Array).length;
            yield chunk as Uint8Array;
          }
        }
        // Fewer bytes than asked for: the object ended inside this range.
        if (got < to - from) return;
        from = to;
        to = from + overrun;
        overrun = Math.min(overrun * 2, Math.max(range.chunkSizeBytes, FIRST_OVERRUN_BYTES));
      }
    }
    return {
      [Symbol.asyncIterator]: () => ranges(),
      close: () => abort.abort(),
    };
  }

  /** The object's size, or undefined when there is no object with that key. */
  private async sizeOf(bucket: string, key: string): Promise<number | undefined> {
    return (await this.headOf(bucket, key))?.size;
  }

  /** The object's size and LastModified, or undefined when there is no object with that key. */
  private async headOf(bucket: string, key: string): Promise<{ size: number; modifiedMs?: number } | undefined> {
    try {
      const head = await this.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { size: head.ContentLength ?? 0, ...(head.LastModified !== undefined ? { modifiedMs: head.LastModified.getTime() } : {}) };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async list(bucket: string, prefix: string): Promise<{ key: string; size: number; modifiedMs?: number }[]> {
    const objects: { key: string; size: number; modifiedMs?: number }[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token !== undefined ? { ContinuationToken: token } : {}) }),
      );
      for (const o of page.Contents ?? []) {
        if (o.Key !== undefined)
          objects.push({ key: o.Key, size: o.Size ?? 0, ...(o.LastModified !== undefined ? { modifiedMs: o.LastModified.getTime() } : {}) });
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return objects;
  }

  private sourceError(path: string, bucket: string, error: unknown): Error {
    if (error instanceof FloeError) return error;
    if (nameOf(error) === 'NoSuchBucket')
      return new InputSourceError(`text source '${path}': the bucket '${bucket}' does not exist (NoSuchBucket); check the path`, { cause: error });
    if (isDenied(error)) {
      return new InputSourceError(
        `text source '${path}': access denied (${describe(error)}); this cluster may not list or read it: grant it with FloeCluster.grantBucketAccess`,
        { cause: error },
      );
    }
    // Throttling, a 5xx, the network: the SDK already retried; the caller may try again later.
    return new FloeError('SOURCE_LIST', `text source '${path}': listing failed: ${describe(error)}`, { cause: error, retryable: true });
  }
}

function describe(error: unknown): string {
  const status = statusOf(error);
  return `${nameOf(error)}${status !== undefined ? ` (HTTP ${status})` : ''}: ${errorMessage(error)}`;
}

/** Region, endpoint and credentials as the AWS services read them (FLOE_AWS_REGION, FLOE_S3_ENDPOINT / FLOE_AWS_ENDPOINT, AWS_*). */
export function s3InputStoreFromEnv(env: NodeJS.ProcessEnv, credentials?: AwsCredentials): S3InputStore {
  const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'] || 'us-east-1';
  const endpoint = env[FloeEnv.S3_ENDPOINT] || env[FloeEnv.AWS_ENDPOINT];
  return new S3InputStore(
    createS3Client({ region, ...(endpoint ? { endpoint } : {}), ...(credentials !== undefined ? { credentials: staticCredentials(credentials) } : {}) }),
  );
}
