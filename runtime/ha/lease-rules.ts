// The lease rules every LeaseStore adapter applies, kept in one place so the adapters cannot drift apart.
import { InvalidRequestError } from '../core/errors.js';

/**
 * A lease can be taken by anyone once it was released or has expired. Expiry is inclusive: at
 * `expiresAtMs` the lease is already gone, so a holder must stop acting before that instant.
 */
export function isLeaseFree(row: { readonly released: boolean; readonly expiresAtMs: number }, nowMs: number): boolean {
  return row.released || row.expiresAtMs <= nowMs;
}

export function assertLeaseArgs(name: string, holder: string, durationMs: number): void {
  if (typeof name !== 'string' || name === '') throw new InvalidRequestError(`lease name must be a non-empty string, found ${JSON.stringify(name)}`);
  if (typeof holder !== 'string' || holder === '') {
    throw new InvalidRequestError(`lease holder must be a non-empty string, found ${JSON.stringify(holder)}; pass the contender's unique id`);
  }
  if (!Number.isFinite(durationMs) || durationMs <= 0) {
    throw new InvalidRequestError(`lease duration must be a positive number of ms, found ${durationMs}`);
  }
}
