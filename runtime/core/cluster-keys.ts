// The keys a cluster derives from its secret, so that no process that runs user code holds the secret:
// a TaskExecutor's key for the job it serves (its RPC identity there) and a job's data-plane key. Each is
// an HMAC of the secret over a label and the names it belongs to; whoever holds the secret (Dispatcher,
// JobManager) derives the key on demand, and the holder of one key learns nothing about the secret or any
// other key. A TaskExecutor's key names its job too, so that user code which reads it can act as that
// TaskExecutor only towards the job it runs in: another job's ResourceManager and JobMaster derive a
// different key and refuse it.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The key of TaskExecutor `resourceId` while it serves job `jobId`: hex, handed to it at launch with its id
 * and job, and again (for the new job) when the warm pool hands it to the next job.
 */
export function taskExecutorKey(secret: string, jobId: string, resourceId: string): string {
  return createHmac('sha256', secret).update(`floe-taskexecutor\0${jobId}\0${resourceId}`).digest('hex');
}

/** The data-plane key of job `jobId`: hex, handed to each TaskExecutor with the job's slot requests. */
export function jobDataKey(secret: string, jobId: string): string {
  return createHmac('sha256', secret).update(`floe-data\0${jobId}`).digest('hex');
}

/** A TaskExecutor's credentials: its id, the job it serves and its key for that job. */
export interface TaskExecutorCredentials {
  readonly resourceId: string;
  readonly jobId: string;
  readonly key: string;
}

const BEARER_PREFIX = 'te.';

/**
 * The bearer token a TaskExecutor identity travels as: `te.<base64url(resourceId)>.<base64url(jobId)>.<key>`.
 * Id and job are encoded so that any character they hold survives; the receiver checks the key against
 * both, and takes the token only at an endpoint of that job.
 */
export function taskExecutorBearer(credentials: TaskExecutorCredentials): string {
  const encode = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');
  return `${BEARER_PREFIX}${encode(credentials.resourceId)}.${encode(credentials.jobId)}.${credentials.key}`;
}

/** The credentials a bearer token names, or undefined when it is not a TaskExecutor's token. */
export function parseTaskExecutorBearer(token: string): TaskExecutorCredentials | undefined {
  if (!token.startsWith(BEARER_PREFIX)) return undefined;
  const parts = token.slice(BEARER_PREFIX.length).split('.');
  if (parts.length !== 3) return undefined;
  const [resourceId, jobId] = [parts[0]!, parts[1]!].map((p) => Buffer.from(p, 'base64url').toString('utf8')) as [string, string];
  const key = parts[2]!;
  if (resourceId === '' || jobId === '' || key === '') return undefined;
  return { resourceId, jobId, key };
}

/** Constant-time equality of two strings, whatever their lengths. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a, 'utf8').digest(), createHash('sha256').update(b, 'utf8').digest());
}

/** Constant-time equality of two byte strings of the length both must have (a proof, an HMAC); any other length is unequal. */
export function sameBytes(received: Uint8Array, expected: Uint8Array, length: number): boolean {
  return received.length === length && expected.length === length && timingSafeEqual(received, expected);
}

/** Who a bearer token proves its caller is. */
export type BearerIdentity = { readonly kind: 'cluster' } | { readonly kind: 'taskexecutor'; readonly resourceId: string; readonly jobId: string };

/** What a process accepts: it holds the cluster secret, or (a TaskExecutor) only its own bearer token. */
export type BearerAcceptor = { readonly secret: string } | { readonly ownBearer: string };

/**
 * The one check of a cluster credential, for RPC and REST alike. A holder of the secret accepts the secret
 * itself (the cluster) and a TaskExecutor's `te.<id>.<job>.<key>` bearer whose key it derives for that
 * id and job. A TaskExecutor accepts only its own bearer, as from the cluster: only a holder of the secret
 * can have derived it. Every comparison is constant-time; undefined when the token proves nothing.
 */
export function verifyBearer(token: string, acceptor: BearerAcceptor): BearerIdentity | undefined {
  if (!('secret' in acceptor)) return sameSecret(token, acceptor.ownBearer) ? { kind: 'cluster' } : undefined;
  if (sameSecret(token, acceptor.secret)) return { kind: 'cluster' };
  const te = parseTaskExecutorBearer(token);
  if (te !== undefined && sameSecret(te.key, taskExecutorKey(acceptor.secret, te.jobId, te.resourceId))) {
    return { kind: 'taskexecutor', resourceId: te.resourceId, jobId: te.jobId };
  }
  return undefined;
}
