// OutputStore on S3 for `s3://bucket/prefix` sink targets. Attempts stage under
// `<prefix>/.floe-staging-<jobId>/<attemptId>/part-<i>`. Many objects cannot appear at once, so the
// manifest `<prefix>/_SUCCESS`, written last, is the commit point (as Hadoop's `_SUCCESS`): readers take
// the output as complete once it exists, and read the files it lists. A commit:
//   1. writes the journal `<staging>/_commit.json` (the final attempts, the files of the earlier output);
//   2. re-checks the target (a failure leaves everything staged, as the message says), and that every
//      part is still the object its task reported (size and ETag; an OutputPartChangedError otherwise);
//   3. writes `<staging>/_copying`, then withdraws the earlier output's manifest (its files are no longer
//      an output), copies each final part to `<prefix>/part-<i>`;
//   4. writes the new manifest: the commit point;
//   5. removes files of the earlier output that the new one did not replace, then the staging area.
// Any step may be repeated: a later call with the journal present resumes where the last one stopped.
import { createReadStream } from 'node:fs';
import { mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  PutObjectTaggingCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { FloeError, InvalidRequestError, OutputTargetError } from '../core/errors.js';
import type { WriteMode } from '../jobgraph/jobgraph.js';
import {
  COMMIT_JOURNAL,
  describePart,
  encodeManifest,
  expectedPart,
  newJournal,
  OUTPUT_MANIFEST,
  OutputPartChangedError,
  parseJournal,
  parseManifest,
  refusalOf,
  type TargetCheckOptions,
  S3_STAGING_PREFIX,
  s3AttemptStagingLocation,
  s3StagingFolder,
  type CommitJournal,
  type CommitOutcome,
  type OutputStore,
  type StagedPart,
  type TargetContent,
} from '../blob/output-store.js';
import { STAGED_TAG } from '../blob/output-rules.js';
import type { RollingPartFiles } from '../blob/rolling-parts.js';
import { openS3RollingParts } from './s3-rolling-parts.js';
import { createS3Client, type AwsCredentials } from './clients.js';
import { FloeEnv } from '../core/floe-env.js';

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
/** Written once the target check passed, before the first change to the target. */
const COPYING = '_copying';

/** The S3 calls the store makes (an S3Client); tests wrap it to fail at a chosen call. */
export type S3Sender = Pick<S3Client, 'send'>;

const isNotFound = (error: unknown): boolean => {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
};

export class S3OutputStore implements OutputStore {
  readonly remote = true;

  constructor(
    private readonly s3: S3Sender,
    private readonly now: () => number = Date.now,
  ) {}

  attemptStagingLocation(target: string, jobId: string, attemptId: string): string {
    parseS3Uri(target);
    return s3AttemptStagingLocation(target, jobId, attemptId);
  }

  /** The part is written to a local temporary folder and uploaded when the task closes its sink. */
  async openAttemptStaging(stagingLocation: string): Promise<string> {
    parseS3Uri(stagingLocation);
    return mkdtemp(joinPath(tmpdir(), 'floe-part-'));
  }

  async uploadPart(stagingLocation: string, subtaskIndex: number, localPath: string): Promise<StagedPart> {
    const { bucket, prefix } = parseS3Uri(stagingLocation);
    const key = join(prefix, `part-${subtaskIndex}`);
    const size = (await stat(localPath)).size;
    // lib-storage switches to a multipart upload past 5 MiB, so a large part never sits in memory whole.
    // Tagged as staged (after the upload, as lib-storage does): a bucket's lifecycle rule expires what a
    // job that never committed left here, and the commit's copies carry no tag.
    const done = await new Upload({
      client: this.s3 as S3Client,
      params: { Bucket: bucket, Key: key, Body: size === 0 ? '' : createReadStream(localPath), ContentType: 'text/plain; charset=utf-8' },
      tags: [STAGED_TAG],
    }).done();
    const etag = 'ETag' in done ? done.ETag : undefined;
    if (etag === undefined) {
      throw new FloeError(
        'S3_UPLOAD',
        `uploading 's3://${bucket}/${key}' returned no ETag; S3 gives one for every stored object, so the endpoint is not S3-compatible enough to commit output on`,
      );
    }
    return { size, etag };
  }

  async openRollingParts(target: string, subtaskIndex: number, _attemptId: string, firstNumber = 0): Promise<RollingPartFiles> {
    const { bucket, prefix } = parseS3Uri(target);
    return openS3RollingParts(this.s3, bucket, prefix, subtaskIndex, firstNumber);
  }

  async checkTarget(target: string, writeMode: WriteMode, jobId: string, options?: TargetCheckOptions): Promise<void> {
    const { bucket, prefix } = parseS3Uri(target);
    let content: TargetContent;
    try {
      content = await this.contentOf(target, bucket, prefix);
    } catch (error) {
      if (error instanceof FloeError) throw error;
      const name = (error as { name?: string }).name;
      // Permanent answers about the target are the user's to fix: say so instead of a 500.
      if (
        name === 'NoSuchBucket' ||
        name === 'AccessDenied' ||
        name === 'Forbidden' ||
        (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 403
      ) {
        throw new OutputTargetError(`cannot look at '${target}': ${name ?? 'access denied'}; check the bucket exists and this cluster may list and read it`);
      }
      throw error;
    }
    const refusal = refusalOf(target, content, writeMode, jobId, [], options);
    if (refusal !== undefined) throw new OutputTargetError(refusal);
  }

  async commit(
    target: string,
    jobId: string,
    writeMode: WriteMode,
    finalAttempts: readonly string[],
    staged: readonly (StagedPart | undefined)[] = [],
  ): Promise<CommitOutcome> {
    const { bucket, prefix } = parseS3Uri(target);
    const staging = join(prefix, `${s3StagingFolder(jobId)}/`);
    let journal = await this.readJournal(bucket, staging);
    const resumed = journal !== undefined;
    const content = await this.contentOf(target, bucket, prefix);
    if (content.kind === 'entries' && content.manifest?.jobId === jobId) {
      // The commit point was passed: only the tidying may be left.
      if (journal !== undefined)
        await this.deleteKeys(
          bucket,
          journal.previousFiles.filter((f) => !journal!.parts.some((p) => p.file === f)).map((f) => join(prefix, f)),
        );
      await this.deleteKeys(bucket, await this.list(bucket, staging));
      return 'already-committed';
    }
    if (journal === undefined) {
      const present = new Set(await this.list(bucket, staging));
      const missing = finalAttempts.map((a, i) => ({ key: `${staging}${a}/part-${i}`, i, a })).filter((p) => !present.has(p.key));
      if (missing.length > 0) {
        throw new FloeError(
          'OUTPUT_MISSING',
          `cannot commit '${target}': finished attempts staged no part file for ${missing.map((m) => `subtask ${m.i} (attempt ${m.a}): 's3://${bucket}/${m.key}'`).join(', ')}`,
        );
      }
      const previous = content.kind === 'entries' && writeMode === 'overwrite' ? (content.manifest?.files ?? []) : [];
      journal = newJournal(target, jobId, writeMode, finalAttempts, previous, staged);
      await this.put(bucket, `${staging}${COMMIT_JOURNAL}`, JSON.stringify(journal), true);
    }

    // What a begun commit may already have written: the old output's files and, once copying began, the new parts.
    const copying = await this.exists(bucket, `${staging}${COPYING}`);
    const mine = [...journal.previousFiles, ...(copying ? journal.parts.map((p) => p.file) : [])];
    const refusal = refusalOf(target, content, journal.writeMode, jobId, mine);
    if (refusal !== undefined) {
      throw new OutputTargetError(
        `${refusal}. The job's output stays staged under 's3://${bucket}/${staging}' (its ${COMMIT_JOURNAL} names the part file of each subtask); it is not deleted`,
      );
    }
    const expected = journal.parts.map((p) => expectedPart(journal!, p.subtask, finalAttempts, staged));
    for (const part of journal.parts) await this.checkStaged(target, bucket, `${staging}${part.attemptId}/${part.file}`, part, expected[part.subtask]);
    if (!copying) await this.put(bucket, `${staging}${COPYING}`, '', true);
    // The earlier output's files are about to change: it stops being an output before the first copy.
    if (content.kind === 'entries' && content.manifest !== undefined) await this.deleteKeys(bucket, [join(prefix, OUTPUT_MANIFEST)]);
    for (const part of journal.parts) {
      const from = `${staging}${part.attemptId}/${part.file}`;
      const want = expected[part.subtask];
      // REPLACE with no tags: the output must not inherit the staged tag (its lifecycle rule would expire it).
      // CopySourceIfMatch closes the gap between the check above and the copy; an endpoint that ignores it
      // (s3rver does) is covered by comparing the copy's ETag below, for parts uploaded in one PUT.
      let copied;
      try {
        copied = await this.s3.send(
          new CopyObjectCommand({
            Bucket: bucket,
            Key: join(prefix, part.file),
            CopySource: `${bucket}/${encodeURIComponent(from).replace(/%2F/g, '/')}`,
            TaggingDirective: 'REPLACE',
            ...(want?.etag !== undefined ? { CopySourceIfMatch: want.etag } : {}),
          }),
        );
      } catch (error) {
        if (want !== undefined && (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 412) {
          throw new OutputPartChangedError(target, part.subtask, part.attemptId, `s3://${bucket}/${from}`, want, 'another object when it was copied');
        }
        throw error;
      }
      // A copy of a one-PUT object has the same MD5 ETag; a multipart part's ETag ('…-<n>') is not repeated by a copy.
      const copiedEtag = copied.CopyObjectResult?.ETag;
      if (want?.etag !== undefined && !want.etag.includes('-') && copiedEtag !== undefined && copiedEtag !== want.etag) {
        throw new OutputPartChangedError(target, part.subtask, part.attemptId, `s3://${bucket}/${from}`, want, `a copy with ETag ${copiedEtag}`);
      }
    }
    await this.put(
      bucket,
      join(prefix, OUTPUT_MANIFEST),
      encodeManifest(
        jobId,
        journal.parts.map((p) => p.file),
        this.now(),
      ),
    );
    const newFiles = new Set(journal.parts.map((p) => p.file));
    await this.deleteKeys(
      bucket,
      journal.previousFiles.filter((f) => !newFiles.has(f)).map((f) => join(prefix, f)),
    );
    await this.deleteKeys(bucket, await this.list(bucket, staging));
    return resumed ? 'resumed' : 'committed';
  }

  async discardAttempt(target: string, jobId: string, attemptId: string): Promise<void> {
    const { bucket, prefix } = parseS3Uri(target);
    const staging = join(prefix, `${s3StagingFolder(jobId)}/`);
    const journal = await this.readJournal(bucket, staging);
    if (journal?.parts.some((p) => p.attemptId === attemptId)) {
      throw new FloeError(
        'ATTEMPT_COMMITTING',
        `attempt ${attemptId} is part of the commit begun under 's3://${bucket}/${staging}'; its output is not discarded`,
      );
    }
    await this.deleteKeys(bucket, await this.list(bucket, `${staging}${attemptId}/`));
  }

  async discard(target: string, jobId: string): Promise<{ readonly kept?: string }> {
    const { bucket, prefix } = parseS3Uri(target);
    const staging = join(prefix, `${s3StagingFolder(jobId)}/`);
    if ((await this.readJournal(bucket, staging)) !== undefined) return { kept: `s3://${bucket}/${staging}` };
    await this.deleteKeys(bucket, await this.list(bucket, staging));
    return {};
  }

  /** The target's objects below `<prefix>/`, staging areas of Floe jobs left out. */
  private async contentOf(target: string, bucket: string, prefix: string): Promise<TargetContent> {
    // An object named like the target is the "regular file" of S3: never made the parent of part files.
    if (prefix !== '' && (await this.exists(bucket, prefix))) {
      throw new OutputTargetError(
        `'${target}' is an object; a text sink writes a prefix of part files and never makes an object the parent of others: choose another path`,
      );
    }
    const base = prefix === '' ? '' : `${prefix}/`;
    const entries = (await this.list(bucket, base))
      .map((k) => k.slice(base.length))
      // '' is a console-made "folder" marker; staging areas are Floe's and not content.
      .filter((name) => name !== '' && !name.startsWith(S3_STAGING_PREFIX));
    if (entries.length === 0) return { kind: 'empty' };
    const manifest = entries.includes(OUTPUT_MANIFEST) ? parseManifest(await this.text(bucket, join(prefix, OUTPUT_MANIFEST))) : undefined;
    return { kind: 'entries', entries, ...(manifest !== undefined ? { manifest } : {}) };
  }

  /** Throws OutputPartChangedError when the staged part at `key` is not the object its task reported. */
  private async checkStaged(
    target: string,
    bucket: string,
    key: string,
    part: CommitJournal['parts'][number],
    expected: StagedPart | undefined,
  ): Promise<void> {
    if (expected === undefined) return;
    let head;
    try {
      head = await this.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    } catch (error) {
      if (isNotFound(error))
        throw new FloeError(
          'OUTPUT_MISSING',
          `cannot commit '${target}': the part of subtask ${part.subtask} (attempt ${part.attemptId}) is gone from 's3://${bucket}/${key}'; was the staging area removed while the job ran?`,
        );
      throw error;
    }
    const found: StagedPart = { size: head.ContentLength ?? -1, ...(head.ETag !== undefined ? { etag: head.ETag } : {}) };
    if (found.size !== expected.size || (expected.etag !== undefined && found.etag !== expected.etag)) {
      throw new OutputPartChangedError(target, part.subtask, part.attemptId, `s3://${bucket}/${key}`, expected, describePart(found));
    }
  }

  private async readJournal(bucket: string, staging: string): Promise<CommitJournal | undefined> {
    const key = `${staging}${COMMIT_JOURNAL}`;
    let text: string;
    try {
      text = await this.text(bucket, key);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    return parseJournal(text, `s3://${bucket}/${key}`);
  }

  private async text(bucket: string, key: string): Promise<string> {
    const res = await this.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return res.Body === undefined ? '' : res.Body.transformToString();
  }

  /** `staged`: the object lives in a staging area, and is tagged so (see STAGED_TAG). */
  private async put(bucket: string, key: string, body: string, staged = false): Promise<void> {
    await this.s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ContentType: key.endsWith('.json') || key.endsWith(OUTPUT_MANIFEST) ? 'application/json' : 'application/octet-stream',
      }),
    );
    if (staged) await this.s3.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: key, Tagging: { TagSet: [STAGED_TAG] } }));
  }

  private async exists(bucket: string, key: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  private async list(bucket: string, prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token !== undefined ? { ContinuationToken: token } : {}) }),
      );
      for (const o of page.Contents ?? []) if (o.Key !== undefined) keys.push(o.Key);
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return keys;
  }

  private async deleteKeys(bucket: string, keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const res = await this.s3.send(
        new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }),
      );
      // DeleteObjects answers 200 even when some keys were not deleted: those are errors, not success.
      const failed = res.Errors ?? [];
      if (failed.length > 0) {
        throw new FloeError(
          'S3_DELETE',
          `could not delete ${failed.length} of ${Math.min(1000, keys.length - i)} objects in s3://${bucket}, e.g. '${failed[0]!.Key}': ${failed[0]!.Code ?? ''} ${failed[0]!.Message ?? ''}`.trim(),
          { retryable: true },
        );
      }
    }
  }
}

/** Region, endpoint and credentials as the AWS services read them (FLOE_AWS_REGION, FLOE_S3_ENDPOINT / FLOE_AWS_ENDPOINT, AWS_*). */
export function s3OutputStoreFromEnv(env: NodeJS.ProcessEnv, credentials?: AwsCredentials): S3OutputStore {
  const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'] || 'us-east-1';
  const endpoint = env[FloeEnv.S3_ENDPOINT] || env[FloeEnv.AWS_ENDPOINT];
  return new S3OutputStore(
    createS3Client({ region, ...(endpoint ? { endpoint } : {}), ...(credentials !== undefined ? { credentials: staticCredentials(credentials) } : {}) }),
  );
}

/** The three fields the SDK signs with (vended job credentials carry their expiry too). */
export const staticCredentials = (c: AwsCredentials): AwsCredentials => ({
  accessKeyId: c.accessKeyId,
  secretAccessKey: c.secretAccessKey,
  ...(c.sessionToken !== undefined ? { sessionToken: c.sessionToken } : {}),
});
