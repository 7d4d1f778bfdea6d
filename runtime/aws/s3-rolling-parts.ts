// The part files of a streaming file sink on S3. A part in progress is a multipart upload to its final key
// `<prefix>/part-<subtask>-<n>`: S3 lists no object for it until the upload is completed, which is the
// roll. Written text is buffered and sent in parts of at least 5 MiB (S3's minimum but for the last part).
// A part never rolled (a cancelled or failed task) stays an incomplete upload, invisible; a bucket
// lifecycle rule (AbortIncompleteMultipartUpload) removes those. A checkpoint's pending part is the upload
// with its parts sent (id and ETags in the sink's state); its commit completes the upload, and finds a part
// committed before (the upload gone, the object there with the part's size) done already. After a restore the
// uploads no state names are aborted.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import { FloeError } from '../core/errors.js';
import {
  nextRollingPartNumber,
  rollingPartName,
  rollingPartNumber,
  type InProgressPart,
  type PendingPart,
  type RollingPartFiles,
} from '../blob/rolling-parts.js';

/** S3's smallest part but the last. */
export const MIN_UPLOAD_PART_BYTES = 5 * 1024 * 1024;

type S3Sender = Pick<S3Client, 'send'>;

const keyIn = (prefix: string, name: string): string => (prefix === '' ? name : `${prefix}/${name}`);

/**
 * Numbers the subtask's parts after those the target prefix holds (objects, and uploads where S3 lists
 * them) and from `firstNumber` on: the caller's earlier parts, pending, are uploads a listing may not show.
 */
export async function openS3RollingParts(s3: S3Sender, bucket: string, prefix: string, subtaskIndex: number, firstNumber = 0): Promise<RollingPartFiles> {
  const names: string[] = [];
  const listPrefix = keyIn(prefix, `part-${subtaskIndex}-`);
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: listPrefix, ...(token !== undefined ? { ContinuationToken: token } : {}) }));
    for (const o of page.Contents ?? []) if (o.Key !== undefined) names.push(o.Key.slice(o.Key.lastIndexOf('/') + 1));
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  // Uploads under way (pending parts of any attempt) hold their numbers too.
  for (const u of await openUploads(s3, bucket, keyIn(prefix, `part-${subtaskIndex}-`))) names.push(u.name);
  let next = nextRollingPartNumber(names, subtaskIndex, firstNumber);

  return {
    async openPart(): Promise<InProgressPart> {
      let name = rollingPartName(subtaskIndex, next++);
      // A key already taken (by anything) is skipped: a part never replaces an object.
      while (await exists(s3, bucket, keyIn(prefix, name))) name = rollingPartName(subtaskIndex, next++);
      const key = keyIn(prefix, name);
      // The mark by which a commit repeated after a failure knows the object for this part.
      const token = randomUUID();
      const created = await s3.send(
        new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: 'text/plain; charset=utf-8', Metadata: { [PART_TOKEN]: token } }),
      );
      const uploadId = created.UploadId;
      if (uploadId === undefined) throw new FloeError('S3_UPLOAD', `starting a multipart upload of 's3://${bucket}/${key}' returned no upload id`);
      const parts: CompletedPart[] = [];
      let buffered: Buffer[] = [];
      let bufferedBytes = 0;
      let size = 0;
      const sendBuffered = async (): Promise<void> => {
        const body = Buffer.concat(buffered);
        buffered = [];
        bufferedBytes = 0;
        const PartNumber = parts.length + 1;
        const done = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber, Body: body }));
        if (done.ETag === undefined) throw new FloeError('S3_UPLOAD', `uploading part ${PartNumber} of 's3://${bucket}/${key}' returned no ETag`);
        parts.push({ PartNumber, ETag: done.ETag });
      };
      return {
        name,
        get size() {
          return size;
        },
        async write(text: string): Promise<void> {
          const bytes = Buffer.from(text);
          buffered.push(bytes);
          bufferedBytes += bytes.length;
          size += bytes.length;
          if (bufferedBytes >= MIN_UPLOAD_PART_BYTES) await sendBuffered();
        },
        async commit(): Promise<string> {
          if (bufferedBytes > 0 || parts.length === 0) await sendBuffered();
          // An upload completes under the key it was started for: an object written there meanwhile fails
          // the roll (found here, or refused by S3 through IfNoneMatch) instead of being replaced.
          if (await exists(s3, bucket, key)) {
            throw new FloeError(
              'OUTPUT_TARGET',
              `cannot roll the part 's3://${bucket}/${key}': an object of that name was written while the part was in progress, and a file sink never replaces one; the part's data stays in its incomplete upload ${uploadId}`,
            );
          }
          await s3.send(
            new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts }, IfNoneMatch: '*' }),
          );
          return name;
        },
        async closeForCommit(): Promise<PendingPart> {
          if (bufferedBytes > 0 || parts.length === 0) await sendBuffered();
          return { name, ref: uploadId, size, token, uploadParts: parts.map((p) => ({ partNumber: p.PartNumber!, etag: p.ETag! })) };
        },
        async abandon(): Promise<void> {
          buffered = [];
          bufferedBytes = 0;
        },
      };
    },
    async commitPending(part: PendingPart): Promise<void> {
      const key = keyIn(prefix, part.name);
      const Parts = (part.uploadParts ?? []).map((p) => ({ PartNumber: p.partNumber, ETag: p.etag }));
      const taken = (): FloeError =>
        new FloeError(
          'OUTPUT_TARGET',
          `cannot commit the part 's3://${bucket}/${key}': an object of that name was written while the part was pending, and a file sink never replaces one; the part's data stays in its incomplete upload ${part.ref}`,
        );
      // Committed before (by an attempt that failed after its commit): the object carries the part's mark.
      const before = await markOf(s3, bucket, key);
      if (before !== undefined) {
        if (part.token !== undefined && before === part.token) return;
        throw taken();
      }
      try {
        await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: part.ref, MultipartUpload: { Parts }, IfNoneMatch: '*' }));
      } catch (error) {
        const after = await markOf(s3, bucket, key);
        if (after !== undefined && part.token !== undefined && after === part.token) return;
        if (after !== undefined) throw taken();
        throw new FloeError('OUTPUT_TARGET', `cannot commit the part 's3://${bucket}/${key}' from its upload ${part.ref}: ${errorText(error)}`, {
          cause: error,
        });
      }
    },
    async removeLeftovers(owns, keep): Promise<string[]> {
      const removed: string[] = [];
      for (const u of await openUploads(s3, bucket, keyIn(prefix, 'part-'))) {
        const subtask = /^part-(\d+)-\d+$/.exec(u.name)?.[1];
        if (subtask === undefined || rollingPartNumber(u.name, Number(subtask)) === undefined || !owns(Number(subtask)) || keep.has(u.uploadId)) continue;
        await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.key, UploadId: u.uploadId }));
        removed.push(u.uploadId);
      }
      return removed;
    },
  };
}

/**
 * The multipart uploads under way whose keys start with `keyPrefix`. An S3 emulator without the listing
 * (NotImplemented) lists none: such uploads stay invisible, and a bucket lifecycle rule aborts them.
 */
async function openUploads(s3: S3Sender, bucket: string, keyPrefix: string): Promise<{ key: string; name: string; uploadId: string }[]> {
  const out: { key: string; name: string; uploadId: string }[] = [];
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  try {
    for (;;) {
      const page = await s3.send(
        new ListMultipartUploadsCommand({
          Bucket: bucket,
          Prefix: keyPrefix,
          ...(keyMarker !== undefined ? { KeyMarker: keyMarker } : {}),
          ...(uploadIdMarker !== undefined ? { UploadIdMarker: uploadIdMarker } : {}),
        }),
      );
      for (const u of page.Uploads ?? []) {
        if (u.Key !== undefined && u.UploadId !== undefined) out.push({ key: u.Key, name: u.Key.slice(u.Key.lastIndexOf('/') + 1), uploadId: u.UploadId });
      }
      if (page.IsTruncated !== true) return out;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  } catch (error) {
    if ((error as { name?: string }).name === 'NotImplemented') return [];
    throw error;
  }
}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The metadata key of a part's mark. */
const PART_TOKEN = 'floe-part';

/** The mark of the object at `key` ('' for an object without one), undefined when there is no object. */
async function markOf(s3: S3Sender, bucket: string, key: string): Promise<string | undefined> {
  try {
    return (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).Metadata?.[PART_TOKEN] ?? '';
  } catch (error) {
    const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e?.name === 'NotFound' || e?.name === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404) return undefined;
    throw error;
  }
}

async function exists(s3: S3Sender, bucket: string, key: string): Promise<boolean> {
  try {
    await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return true;
  } catch (error) {
    const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e?.name === 'NotFound' || e?.name === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404) return false;
    throw error;
  }
}
