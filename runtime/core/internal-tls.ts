// TLS between a cluster's own processes (`security.ssl.internal.enabled`), with pre-shared keys instead of
// certificates: peers find each other at runtime, and each side already holds a key the other can check.
// A TLS-PSK handshake names an identity and proves the key behind it, so it authenticates the peer and
// encrypts the connection at once. The keys come from cluster-keys.ts, each passed through an HMAC with a
// label of its own so that no key is used both as a bearer token or handshake key and as a TLS key:
//   RPC to a holder of the cluster secret: identity `cluster` (a holder of the secret) or a TaskExecutor's
//     identity for its job (the server derives that TaskExecutor's key from the secret);
//   RPC to a TaskExecutor: its own identity for the job it serves now, with its key for that job;
//   a data connection: identity = the job id, with the job's data key.
// The bearer token and the data handshake still run inside: the TLS identity is checked per connection,
// those per call and per job, and they keep the checks the same whether TLS is on or off.
import { createHmac } from 'node:crypto';
import type { ConnectionOptions, TlsOptions } from 'node:tls';
import { FloeError } from './errors.js';

/** TLS 1.2 PSK suites with ephemeral ECDH, so a key that leaks later does not open recorded traffic. */
export const INTERNAL_TLS_CIPHERS = 'ECDHE-PSK-CHACHA20-POLY1305:ECDHE-PSK-AES256-CBC-SHA384';
/** The PSK identity of a holder of the cluster secret. */
export const CLUSTER_TLS_IDENTITY = 'cluster';
/**
 * A peer that connects and does not finish the TLS handshake within this long is disconnected (ms): as
 * long as a data connection may take for its own handshake, far below Node's default of two minutes.
 */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/** The longest PSK identity a TLS handshake carries (bytes). */
export const MAX_TLS_IDENTITY_BYTES = 256;

const TE_IDENTITY_PREFIX = 'te.';

const tlsKey = (key: string, label: string): Buffer => createHmac('sha256', key).update(`floe-tls\0${label}`).digest();

/** The TLS key of a holder of the cluster secret. */
export const clusterTlsKey = (secret: string): Buffer => tlsKey(secret, 'cluster');
/** The TLS key of a TaskExecutor's RPC endpoint, from its key for its job (cluster-keys.ts `taskExecutorKey`). */
export const taskExecutorTlsKey = (taskExecutorKey: string): Buffer => tlsKey(taskExecutorKey, 'taskexecutor');
/** The TLS key of a job's data connections, from the job's data key (cluster-keys.ts `jobDataKey`). */
export const dataTlsKey = (jobDataKey: string): Buffer => tlsKey(jobDataKey, 'data');

/** The PSK identity of TaskExecutor `resourceId` serving job `jobId`: `te.<base64url(id)>.<base64url(job)>`. */
export function taskExecutorTlsIdentity(resourceId: string, jobId: string): string {
  const encode = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');
  return checkedIdentity(`${TE_IDENTITY_PREFIX}${encode(resourceId)}.${encode(jobId)}`, `TaskExecutor ${resourceId} of job ${jobId}`);
}

/** The TaskExecutor and job a PSK identity names, or undefined when it names none. */
export function parseTaskExecutorTlsIdentity(identity: string): { resourceId: string; jobId: string } | undefined {
  if (!identity.startsWith(TE_IDENTITY_PREFIX)) return undefined;
  const parts = identity.slice(TE_IDENTITY_PREFIX.length).split('.');
  if (parts.length !== 2) return undefined;
  const [resourceId, jobId] = parts.map((p) => Buffer.from(p, 'base64url').toString('utf8')) as [string, string];
  return resourceId === '' || jobId === '' ? undefined : { resourceId, jobId };
}

/** The PSK identity of a data connection of job `jobId`. */
export const dataTlsIdentity = (jobId: string): string => checkedIdentity(jobId, `job ${jobId}`);

function checkedIdentity(identity: string, of: string): string {
  const bytes = Buffer.byteLength(identity, 'utf8');
  if (bytes > MAX_TLS_IDENTITY_BYTES) {
    throw new FloeError(
      'CONFIGURATION',
      `the TLS identity of ${of} takes ${bytes} bytes, more than the ${MAX_TLS_IDENTITY_BYTES} a TLS handshake carries; use shorter job and resource ids, or set 'security.ssl.internal.enabled' to false`,
    );
  }
  return identity;
}

const PROTOCOL = { ciphers: INTERNAL_TLS_CIPHERS, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' } as const;

/**
 * Options of a TLS server that accepts only peers proving the key `keyOf` gives for the identity they
 * name; an identity it gives no key for (undefined) ends the handshake. `onIdentity` learns which
 * identity each accepted socket proved.
 */
export function pskServerOptions(keyOf: (identity: string) => Buffer | undefined, onIdentity?: (socket: object, identity: string) => void): TlsOptions {
  return {
    ...PROTOCOL,
    handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
    pskCallback: (socket, identity) => {
      const key = keyOf(identity);
      if (key === undefined) return null;
      onIdentity?.(socket, identity);
      return key;
    },
  };
}

/** Options of a TLS client that names `identity` and proves `key`; the server proves the same key back. */
export function pskClientOptions(identity: string, key: Buffer): ConnectionOptions {
  return {
    ...PROTOCOL,
    pskCallback: () => ({ identity, psk: key }),
    // There is no certificate: the server is authenticated by completing the handshake with the key.
    checkServerIdentity: () => undefined,
  };
}
