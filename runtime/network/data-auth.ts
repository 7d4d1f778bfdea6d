// The handshake that opens every TCP data connection: each side proves it knows the cluster secret
// over a nonce the other side just chose, before any partition is requested or any buffer sent.
//
//   consumer → producer: HELLO  clientNonce
//   producer → consumer: CHALLENGE  serverNonce ‖ HMAC(secret, "floe-data-server" ‖ clientNonce ‖ serverNonce)
//   consumer → producer: PROOF  HMAC(secret, "floe-data-client" ‖ serverNonce ‖ clientNonce)
//
// The labels keep one side's proof from being replayed as the other's; fresh nonces on both sides keep
// a recorded handshake from being replayed at all. Proofs are compared in constant time.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const NONCE_BYTES = 32;
const PROOF_BYTES = 32;

/** A peer that connects and does not finish the handshake within this long is disconnected (ms). */
export const DATA_HANDSHAKE_TIMEOUT_MS = 10_000;

export const newNonce = (): Buffer => randomBytes(NONCE_BYTES);

function proof(secret: string, label: string, first: Uint8Array, second: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(label).update(first).update(second).digest();
}

export const serverProof = (secret: string, clientNonce: Uint8Array, serverNonce: Uint8Array): Buffer => proof(secret, 'floe-data-server', clientNonce, serverNonce);
export const clientProof = (secret: string, serverNonce: Uint8Array, clientNonce: Uint8Array): Buffer => proof(secret, 'floe-data-client', serverNonce, clientNonce);

/** Constant-time comparison of a received proof with the expected one; a proof of the wrong length is refused. */
export function proofMatches(received: Uint8Array, expected: Buffer): boolean {
  return received.length === PROOF_BYTES && expected.length === PROOF_BYTES && timingSafeEqual(received, expected);
}

/** The CHALLENGE payload: the producer's nonce, then its proof. */
export function encodeChallenge(serverNonce: Buffer, proofBytes: Buffer): Buffer {
  return Buffer.concat([serverNonce, proofBytes]);
}

export function decodeChallenge(payload: Uint8Array): { serverNonce: Uint8Array; proof: Uint8Array } | undefined {
  if (payload.length !== NONCE_BYTES + PROOF_BYTES) return undefined;
  return { serverNonce: payload.subarray(0, NONCE_BYTES), proof: payload.subarray(NONCE_BYTES) };
}

export function requireDataSecret(secret: string): string {
  if (secret === '') throw new Error('the data plane needs the cluster secret to authenticate connections between TaskExecutors; it is empty');
  return secret;
}
