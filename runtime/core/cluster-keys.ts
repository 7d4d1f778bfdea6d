// The keys a cluster derives from its secret, so that no process that runs user code holds the secret:
// a TaskExecutor's own key (its RPC identity) and a job's data-plane key. Each is an HMAC of the secret
// over a label and the name it belongs to; whoever holds the secret (Dispatcher, JobManager) derives the
// key on demand, and the holder of one key learns nothing about the secret or any other key.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** The key of TaskExecutor `resourceId`: hex, handed to it at launch together with its id. */
export function taskExecutorKey(secret: string, resourceId: string): string {
  return createHmac('sha256', secret).update(`floe-taskexecutor\0${resourceId}`).digest('hex');
}

/** The data-plane key of job `jobId`: hex, handed to each TaskExecutor with the job's slot requests. */
export function jobDataKey(secret: string, jobId: string): string {
  return createHmac('sha256', secret).update(`floe-data\0${jobId}`).digest('hex');
}

/** A TaskExecutor's credentials: its id and its own key. */
export interface TaskExecutorCredentials {
  readonly resourceId: string;
  readonly key: string;
}

const BEARER_PREFIX = 'te.';

/**
 * The bearer token a TaskExecutor identity travels as: `te.<base64url(resourceId)>.<key>`. The id is
 * encoded so that any character it holds survives; the receiver checks the key against the id.
 */
export function taskExecutorBearer(credentials: TaskExecutorCredentials): string {
  return `${BEARER_PREFIX}${Buffer.from(credentials.resourceId, 'utf8').toString('base64url')}.${credentials.key}`;
}

/** The credentials a bearer token names, or undefined when it is not a TaskExecutor's token. */
export function parseTaskExecutorBearer(token: string): TaskExecutorCredentials | undefined {
  if (!token.startsWith(BEARER_PREFIX)) return undefined;
  const rest = token.slice(BEARER_PREFIX.length);
  const dot = rest.indexOf('.');
  if (dot <= 0) return undefined;
  const resourceId = Buffer.from(rest.slice(0, dot), 'base64url').toString('utf8');
  const key = rest.slice(dot + 1);
  if (resourceId === '' || key === '') return undefined;
  return { resourceId, key };
}

/** Constant-time equality of two strings, whatever their lengths. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a, 'utf8').digest(), createHash('sha256').update(b, 'utf8').digest());
}
