// BlobStore on S3: one object per key, under a key prefix in one bucket. A PUT, and the completion of a
// multipart upload, replace an object atomically, so readers see the whole blob or none. No write relies
// on a conditional PUT (If-None-Match): content-addressed keys make a repeated write harmless, and not
// every S3 emulator honours the condition.
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { InvalidRequestError } from '../core/errors.js';
import type { BlobStore } from '../blob/blob-store.js';
import type { JobDataCredentials } from '../blob/data-credentials.js';
import type { AwsCredentials } from './clients.js';
import { awsCall } from './aws-errors.js';

export interface S3BlobStoreOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Prepended to every key, e.g. `floe/`; keys come back without it. @default '' */
  readonly prefix?: string;
  /**
   * Blobs larger than this go up as a multipart upload in parts of this size (bytes); S3 needs at least
   * 5 MiB per part. @default 8 MiB
   */
  readonly multipartPartSizeBytes?: number;
  /** Parts of one upload in flight at once. @default 4 */
  readonly multipartQueueSize?: number;
  /** Keys per ListObjectsV2 page (S3 answers at most 1000). @default 1000 */
  readonly listPageSize?: number;
  /** Runs on close(), e.g. to destroy a client the store owns. */
  readonly onClose?: () => void;
  /** A client like `client` that signs with other credentials (see withCredentials). @default - none: withCredentials throws */
  readonly clientWith?: (credentials: AwsCredentials) => S3Client;
}

const MIN_PART_SIZE_BYTES = 5 * 1024 * 1024;
export const DEFAULT_PART_SIZE_BYTES = 8 * 1024 * 1024;

export class S3BlobStore implements BlobStore {
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly partSize: number;
  private closed = false;

  constructor(private readonly options: S3BlobStoreOptions) {
    this.s3 = options.client;
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
    this.partSize = options.multipartPartSizeBytes ?? DEFAULT_PART_SIZE_BYTES;
    if (!(this.partSize >= MIN_PART_SIZE_BYTES)) {
      throw new InvalidRequestError(`multipartPartSizeBytes must be at least ${MIN_PART_SIZE_BYTES} (S3's smallest part), found ${this.partSize}`);
    }
    if (this.prefix.startsWith('/')) throw new InvalidRequestError(`S3 key prefix '${this.prefix}' must not start with '/'`);
  }

  async put(key: string, data: Uint8Array): Promise<void> {
    const Key = this.keyOf(key);
    if (data.byteLength <= this.partSize) {
      await this.call('PutObject', key, () => this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body: data, ContentLength: data.byteLength })));
      return;
    }
    const upload = new Upload({
      client: this.s3,
      params: { Bucket: this.bucket, Key, Body: data },
      partSize: this.partSize,
      queueSize: this.options.multipartQueueSize ?? 4,
      // A failed upload is aborted, so its parts are not left behind to be billed.
      leavePartsOnError: false,
    });
    await this.call('multipart upload', key, () => upload.done());
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const Key = this.keyOf(key);
    const out = await this.call('GetObject', key, async () => {
      try {
        return await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key }));
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    });
    if (out?.Body === undefined) return undefined;
    const bytes = await this.call('GetObject (body)', key, () => out.Body!.transformToByteArray());
    // A plain Uint8Array, as from the other adapters.
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async exists(key: string): Promise<boolean> {
    const Key = this.keyOf(key);
    return this.call('HeadObject', key, async () => {
      try {
        await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key }));
        return true;
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
    });
  }

  async delete(key: string): Promise<void> {
    const Key = this.keyOf(key);
    await this.call('DeleteObject', key, () => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key })));
  }

  async list(prefix: string): Promise<string[]> {
    if (typeof prefix !== 'string') throw new InvalidRequestError(`blob prefix must be a string, found ${JSON.stringify(prefix)}`);
    const keys: string[] = [];
    // Pages continue after the last key seen (StartAfter) rather than with a continuation token: the
    // same on S3 for a listing without delimiter, and independent of how an emulator makes its tokens.
    let after: string | undefined;
    do {
      const page = await this.call('ListObjectsV2', `${prefix}*`, () =>
        this.s3.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.prefix + prefix,
            ...(after !== undefined && { StartAfter: after }),
            ...(this.options.listPageSize !== undefined && { MaxKeys: this.options.listPageSize }),
          }),
        ),
      );
      const contents = (page.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [o.Key]));
      for (const key of contents) keys.push(key.slice(this.prefix.length));
      after = page.IsTruncated === true ? contents.at(-1) : undefined;
    } while (after !== undefined);
    // S3 orders by UTF-8 bytes, JavaScript by UTF-16 units; the port promises the latter.
    return keys.sort();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const store of this.credentialed.values()) void store.close();
    this.options.onClose?.();
  }

  /** Stores of vended credentials, by access key (a job's credentials are renewed every hour or so). */
  private readonly credentialed = new Map<string, S3BlobStore>();

  /** This store signing with a job's vended credentials: what that job's tasks may read, and no more. */
  withCredentials(credentials: JobDataCredentials): BlobStore {
    const clientWith = this.options.clientWith;
    if (clientWith === undefined) throw new InvalidRequestError('this S3 blob store was made without clientWith, so it cannot sign with other credentials');
    let store = this.credentialed.get(credentials.accessKeyId);
    if (store === undefined) {
      if (this.credentialed.size >= 4) {
        const [oldest, old] = this.credentialed.entries().next().value!;
        this.credentialed.delete(oldest);
        void old.close();
      }
      const client = clientWith({ accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey, sessionToken: credentials.sessionToken });
      store = new S3BlobStore({ ...this.options, client, onClose: () => client.destroy() });
      this.credentialed.set(credentials.accessKeyId, store);
    }
    return store;
  }

  private keyOf(key: string): string {
    if (typeof key !== 'string' || key === '') throw new InvalidRequestError(`blob key must be a non-empty string, found ${JSON.stringify(key)}`);
    if (key.startsWith('/')) throw new InvalidRequestError(`blob key '${key}' must be a relative path with '/' separators, found an absolute path`);
    return this.prefix + key;
  }

  private call<T>(operation: string, key: string, fn: () => Promise<T>): Promise<T> {
    return awsCall('S3', operation, `s3://${this.bucket}/${this.prefix}${key}`, fn);
  }
}

function isNotFound(error: unknown): boolean {
  const e = error as { name?: unknown; $metadata?: { httpStatusCode?: number } } | null;
  // A missing bucket is also a 404, but a configuration error, not an absent blob.
  if (e?.name === 'NoSuchBucket') return false;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}
