// What this Dispatcher has verified about stored libraries, so a library submitted again within a
// short while is not read back and hashed again (on AWS one S3 GET for POST /artifacts and one for
// POST /jobs: about a third of a warm submission's path on the emulators).
//
// A library is stored under its sha256, so bytes verified under a key keep their meaning; what can
// change is whether the object is still there and still those bytes: the bucket's lifecycle rule
// expires libraries, an operator may delete one, and a presigned upload URL handed out earlier lets a
// client write other bytes under the key. So a fact is trusted only for `freshMs` after it was
// checked, then checked again; and a TaskExecutor checks the hash of every library it reads, so bytes
// replaced inside that window fail the job naming the library instead of running other code.
import type { Clock } from '../core/clock.js';

export interface VerifiedLibrary {
  readonly sizeBytes: number;
  /**
   * The names the library exports (what the JobGraph's function references are checked against);
   * undefined when its bytes are not an ES module.
   */
  readonly exports: readonly string[] | undefined;
}

export const DEFAULT_VERIFIED_LIBRARY_FRESH_MS = 60_000;
const DEFAULT_CAPACITY = 256;

export class VerifiedLibraries {
  /** By sha256, oldest check first. */
  private readonly checked = new Map<string, VerifiedLibrary & { readonly atMs: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly freshMs = DEFAULT_VERIFIED_LIBRARY_FRESH_MS,
    private readonly capacity = DEFAULT_CAPACITY,
  ) {}

  /** The library stored under `sha256` as checked within `freshMs`, or undefined. */
  get(sha256: string): VerifiedLibrary | undefined {
    const fact = this.checked.get(sha256);
    if (fact === undefined) return undefined;
    if (this.clock.now() - fact.atMs >= this.freshMs) {
      this.checked.delete(sha256);
      return undefined;
    }
    return fact;
  }

  /** Call only once bytes that hash to `sha256` are known to be stored under its key. */
  remember(sha256: string, library: VerifiedLibrary): void {
    this.checked.delete(sha256);
    this.checked.set(sha256, { sizeBytes: library.sizeBytes, exports: library.exports, atMs: this.clock.now() });
    for (const oldest of this.checked.keys()) {
      if (this.checked.size <= this.capacity) break;
      this.checked.delete(oldest);
    }
  }

  /** Call when the store was found without the library (or with other bytes) under its key. */
  forget(sha256: string): void {
    this.checked.delete(sha256);
  }
}
