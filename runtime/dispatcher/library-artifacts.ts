// The user-code libraries the Dispatcher stores (Flink's BlobServer and jar upload): POST /artifacts and
// PUT /artifacts/:sha256, and the library a submission names, checked against its hash, its size and the
// exports its JobGraph references. A library is stored under its sha256; VerifiedLibraries remembers for
// a while what was checked, so a library submitted again is not read back and hashed again.
import { blobKeys, sha256Hex } from '../blob/blob-store.js';
import { InvalidRequestError, LibraryNotStoredError, PayloadTooLargeError } from '../core/errors.js';
import { listLibraryExports } from '../api/library-exports.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import type { ArtifactUploadResponse } from '../protocol/rest-api.js';
import type { DispatcherServices } from './dispatcher-services.js';
import { ARTIFACT_UPLOAD_BODY, parseBody, SHA256_HEX } from './rest-bodies.js';
import { VerifiedLibraries } from './verified-libraries.js';

export class LibraryArtifacts {
  private readonly verifiedLibraries: VerifiedLibraries;

  constructor(private readonly deps: Pick<DispatcherServices, 'blobStore' | 'config' | 'clock' | 'artifactUploads'>) {
    this.verifiedLibraries = new VerifiedLibraries(deps.clock);
  }

  /** POST /artifacts: where to upload a library before a POST /jobs that leaves `library` out. */
  async createArtifactUpload(body: unknown): Promise<ArtifactUploadResponse> {
    const { sha256, sizeBytes } = parseBody(ARTIFACT_UPLOAD_BODY, body);
    if (sizeBytes > this.deps.config.restMaxContentLengthBytes) {
      throw new PayloadTooLargeError(
        'the library',
        sizeBytes,
        this.deps.config.restMaxContentLengthBytes,
        "raise 'rest.server.max-content-length' or make the library smaller",
      );
    }
    const key = blobKeys.library(sha256);
    // An object under the key that is not the library (an upload of other bytes) may be replaced.
    if (await this.hasValidLibrary(sha256)) return { sha256, key, exists: true };
    const upload =
      this.deps.artifactUploads !== undefined
        ? await this.deps.artifactUploads.createUpload(key, sha256, sizeBytes)
        : { url: `/artifacts/${sha256}`, headers: {}, expiresAtMs: this.deps.clock.now() + 3_600_000 };
    return { sha256, key, exists: false, upload: { method: 'PUT', ...upload } };
  }

  /** PUT /artifacts/:sha256: the library's bytes, checked against the hash before they are stored. */
  async putArtifact(sha256: string, bytes: Uint8Array | undefined): Promise<{ sha256: string; key: string }> {
    if (!SHA256_HEX.test(sha256)) throw new InvalidRequestError(`'${sha256}' is not a sha256 (64 lowercase hex digits)`);
    if (bytes === undefined || bytes.length === 0) throw new InvalidRequestError("request body is empty; expected the library's bytes");
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw new InvalidRequestError(`the body has sha256 ${actual}, not ${sha256}; upload the library's exact bytes`);
    await this.storeLibrary(bytes);
    return { sha256, key: blobKeys.library(sha256) };
  }

  /**
   * The library a submission names, checked: its exports, and its bytes when they came with the request
   * (to be stored). A library this Dispatcher verified in the store a moment ago is not read again.
   */
  async submittedLibrary(jobGraph: JobGraph, raw: string | undefined): Promise<{ inline?: Uint8Array; exports: readonly string[] }> {
    const { sha256, sizeBytes } = jobGraph.library;
    if (raw === undefined) {
      const known = this.verifiedLibraries.get(sha256);
      if (known?.exports !== undefined) {
        checkStoredSize(sha256, sizeBytes, known.sizeBytes);
        return { exports: known.exports };
      }
      const stored = await this.deps.blobStore.get(blobKeys.library(sha256));
      if (stored === undefined) {
        this.verifiedLibraries.forget(sha256);
        throw new LibraryNotStoredError(sha256);
      }
      // An upload URL lets a client write any bytes under the key; only the hash makes them the library.
      // What is stored is never removed here: other jobs may be using it, and this request may be the wrong one.
      const actual = sha256Hex(stored);
      if (actual !== sha256) {
        this.verifiedLibraries.forget(sha256);
        throw new LibraryNotStoredError(
          sha256,
          `the object stored as library ${sha256} has sha256 ${actual} (${stored.length} bytes): an upload put other bytes there; ` +
            "upload the library's exact bytes through POST /artifacts (it offers to replace them) or send them in the field 'library'",
        );
      }
      checkStoredSize(sha256, sizeBytes, stored.length);
      const exports = await listLibraryExports(stored);
      this.verifiedLibraries.remember(sha256, { sizeBytes: stored.length, exports });
      return { exports };
    }
    const bytes = Buffer.from(raw, 'base64');
    if (bytes.length > this.deps.config.restMaxContentLengthBytes) {
      throw new PayloadTooLargeError('the library', bytes.length, this.deps.config.restMaxContentLengthBytes);
    }
    if (bytes.length !== sizeBytes) throw new InvalidRequestError(`field 'library' has ${bytes.length} bytes but jobGraph.library.sizeBytes says ${sizeBytes}`);
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw new InvalidRequestError(`field 'library' has sha256 ${actual} but jobGraph.library.sha256 says ${sha256}`);
    return { inline: bytes, exports: this.verifiedLibraries.get(sha256)?.exports ?? (await listLibraryExports(bytes)) };
  }

  /**
   * Stores verified library bytes under their hash. A valid copy already there is kept; an object there
   * that does not match its hash (an upload of other bytes) is replaced by these, which are the library.
   */
  async storeLibrary(bytes: Uint8Array): Promise<void> {
    const sha256 = sha256Hex(bytes);
    if (await this.hasValidLibrary(sha256)) return;
    await this.deps.blobStore.put(blobKeys.library(sha256), bytes);
    this.verifiedLibraries.remember(sha256, { sizeBytes: bytes.length, exports: await exportsIfModule(bytes) });
  }

  /** Whether the store holds the library's own bytes under its key (remembered for a while if so). */
  async hasValidLibrary(sha256: string): Promise<boolean> {
    if (this.verifiedLibraries.get(sha256) !== undefined) return true;
    const stored = await this.deps.blobStore.get(blobKeys.library(sha256));
    if (stored === undefined || sha256Hex(stored) !== sha256) {
      this.verifiedLibraries.forget(sha256);
      return false;
    }
    this.verifiedLibraries.remember(sha256, { sizeBytes: stored.length, exports: await exportsIfModule(stored) });
    return true;
  }
}

function checkStoredSize(sha256: string, sizeBytes: number, storedBytes: number): void {
  if (storedBytes !== sizeBytes) {
    throw new InvalidRequestError(
      `jobGraph.library.sizeBytes says ${sizeBytes}, but the stored library ${sha256} has ${storedBytes} bytes; send its real size`,
    );
  }
}

/**
 * The library's exports, or undefined when its bytes are not an ES module. Storing such bytes is not
 * wrong in itself (PUT /artifacts takes any bytes with the right hash); a job naming them is refused
 * at submission, with the parser's message.
 */
async function exportsIfModule(bytes: Uint8Array): Promise<readonly string[] | undefined> {
  try {
    return await listLibraryExports(bytes);
  } catch (error) {
    if (error instanceof InvalidRequestError) return undefined;
    throw error;
  }
}
