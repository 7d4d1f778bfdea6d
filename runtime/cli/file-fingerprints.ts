// What a cache remembers of a file it depends on: the sha256 of its content, and the stat that lets a
// later run skip reading it. Content decides; the stat only proves "not written since" (as git's index
// does): same size, mtime and ctime (which no tool can set back) as when hashed, and hashed well after
// the last write, so a write in the same clock tick as the hash cannot hide behind an equal mtime.
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';

export interface FileFingerprint {
  readonly sha256: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  /** When the content was hashed (wall clock, ms). */
  readonly hashedAtMs: number;
}

/** A file written less than this before it was hashed is hashed again every time (timestamps are coarse). */
const RACY_MS = 2_000;

export const sha256Of = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** Hashes `file` (throws when it cannot be read). */
export function fingerprint(file: string): FileFingerprint {
  const before = statSync(file);
  const sha256 = sha256Of(readFileSync(file));
  return { sha256, size: before.size, mtimeMs: before.mtimeMs, ctimeMs: before.ctimeMs, hashedAtMs: Date.now() };
}

/** Whether `file` still has the content it had when `fp` was taken; false when it is gone or unreadable. */
export function stillSame(file: string, fp: FileFingerprint): boolean {
  if (typeof fp !== 'object' || fp === null || typeof fp.sha256 !== 'string') return false;
  let st;
  try {
    st = statSync(file);
  } catch {
    return false;
  }
  if (st.size !== fp.size) return false;
  const settled = fp.hashedAtMs - Math.max(fp.mtimeMs, fp.ctimeMs) > RACY_MS;
  if (settled && st.mtimeMs === fp.mtimeMs && st.ctimeMs === fp.ctimeMs) return true;
  try {
    return sha256Of(readFileSync(file)) === fp.sha256;
  } catch {
    return false;
  }
}
