// The handshake that opens every TCP data connection: the consumer names the job whose partitions it
// reads, and each side proves it holds that job's data key (core/cluster-keys.ts) over a nonce the other
// side just chose, before any partition is requested or any buffer sent.
//
//   consumer → producer: HELLO  clientNonce ‖ jobId
//   producer → consumer: CHALLENGE  serverNonce ‖ HMAC(key(job), "floe-data-server" ‖ jobId ‖ clientNonce ‖ serverNonce)
//   consumer → producer: PROOF  HMAC(key(job), "floe-data-client" ‖ jobId ‖ serverNonce ‖ clientNonce)
//
// A producer that holds no key for the named job closes the connection at once; one that accepts serves
// on it only that job's partitions. The labels keep one side's proof from being replayed as the other's;
// fresh nonces on both sides keep a recorded handshake from being replayed at all. Proofs are compared in
// constant time.
import { createHmac, randomBytes } from 'node:crypto';
import { sameBytes } from '../core/cluster-keys.js';

export const NONCE_BYTES = 32;
const PROOF_BYTES = 32;
/** Longest job id a HELLO may name (bytes). */
const MAX_JOB_ID_BYTES = 256;

/** A peer that connects and does not finish the handshake within this long is disconnected (ms). */
export const DATA_HANDSHAKE_TIMEOUT_MS = 10_000;

/** The data-plane key of a job, or undefined when this TaskExecutor serves no such job. */
export type DataKeys = (jobId: string) => string | undefined;

export const newNonce = (): Buffer => randomBytes(NONCE_BYTES);

function proof(key: string, label: string, jobId: string, first: Uint8Array, second: Uint8Array): Buffer {
  return createHmac('sha256', key).update(label).update('\0').update(jobId).update('\0').update(first).update(second).digest();
}

export const serverProof = (key: string, jobId: string, clientNonce: Uint8Array, serverNonce: Uint8Array): Buffer =>
  proof(key, 'floe-data-server', jobId, clientNonce, serverNonce);
export const clientProof = (key: string, jobId: string, serverNonce: Uint8Array, clientNonce: Uint8Array): Buffer =>
  proof(key, 'floe-data-client', jobId, serverNonce, clientNonce);

/** Constant-time comparison of a received proof with the expected one; a proof of the wrong length is refused. */
export function proofMatches(received: Uint8Array, expected: Buffer): boolean {
  return sameBytes(received, expected, PROOF_BYTES);
}

/** The HELLO payload: the consumer's nonce, then the job it reads for. */
export function encodeHello(clientNonce: Buffer, jobId: string): Buffer {
  return Buffer.concat([clientNonce, Buffer.from(jobId, 'utf8')]);
}

export function decodeHello(payload: Uint8Array): { clientNonce: Uint8Array; jobId: string } | undefined {
  const jobBytes = payload.length - NONCE_BYTES;
  if (jobBytes < 1 || jobBytes > MAX_JOB_ID_BYTES) return undefined;
  return { clientNonce: payload.subarray(0, NONCE_BYTES), jobId: Buffer.from(payload.subarray(NONCE_BYTES)).toString('utf8') };
}

/** The CHALLENGE payload: the producer's nonce, then its proof. */
export function encodeChallenge(serverNonce: Buffer, proofBytes: Buffer): Buffer {
  return Buffer.concat([serverNonce, proofBytes]);
}

export function decodeChallenge(payload: Uint8Array): { serverNonce: Uint8Array; proof: Uint8Array } | undefined {
  if (payload.length !== NONCE_BYTES + PROOF_BYTES) return undefined;
  return { serverNonce: payload.subarray(0, NONCE_BYTES), proof: payload.subarray(NONCE_BYTES) };
}
