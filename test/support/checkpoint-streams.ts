// Checkpoint storage in memory for operator tests: a CheckpointStreamFactory that keeps each written file's
// bytes by URI and counts the bytes read back, so a test can check what a restore fetched.
import type { CheckpointStreamFactory } from '../../runtime/checkpoint/checkpoint-storage.js';
import type { StreamStateHandle } from '../../runtime/protocol/checkpoints.js';

export class MemoryCheckpointStreams implements CheckpointStreamFactory {
  readonly files = new Map<string, Uint8Array>();
  bytesRead = 0;
  reads = 0;

  async write(checkpointId: number, name: string, bytes: Uint8Array, options?: { readonly shared?: boolean }): Promise<StreamStateHandle> {
    await Promise.resolve();
    const uri = `memory://${options?.shared === true ? 'shared' : `chk-${checkpointId}`}/${name}`;
    if (this.files.has(uri)) throw new Error(`a state file ${uri} was written twice; names must be unique in a checkpoint`);
    this.files.set(uri, bytes.slice());
    return { uri, size: bytes.length };
  }

  /** The shared files are this job's own, unless `foreign` says they came from elsewhere (a savepoint, another job). */
  foreign = false;
  isOwnSharedFile(uri: string): boolean {
    return !this.foreign && uri.startsWith('memory://shared/');
  }

  /** Reads into `into` when it is given, as the local file store does: a reader keeping its views sees them change. */
  async read(handle: StreamStateHandle, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array> {
    await Promise.resolve();
    const bytes = this.files.get(handle.uri);
    if (bytes === undefined) throw new Error(`no state file ${handle.uri}`);
    let out: Uint8Array = range === undefined ? bytes.slice() : bytes.slice(range.offset, range.offset + range.length);
    if (into !== undefined && into.length >= out.length) {
      into.set(out);
      out = into.subarray(0, out.length);
    }
    this.reads++;
    this.bytesRead += out.length;
    return out;
  }
}
