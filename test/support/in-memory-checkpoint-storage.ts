// CheckpointStorage kept in a Map of URIs to bytes, laid out as the file storage lays out its files
// (<job>/chk-<id>/…, <job>/shared/…): a test reads which files exist after checkpoints are subsumed.
import type { CheckpointStorage } from '../../runtime/checkpoint/checkpoint-storage.js';
import type { StreamStateHandle } from '../../runtime/protocol/checkpoints.js';

export class InMemoryCheckpointStorage implements CheckpointStorage {
  readonly files = new Map<string, Uint8Array>();

  constructor(private readonly base = 'memory:///checkpoints/job') {}

  async write(checkpointId: number, name: string, bytes: Uint8Array, options?: { readonly shared?: boolean }): Promise<StreamStateHandle> {
    const uri = options?.shared === true ? `${this.base}/shared/${name}` : `${this.base}/chk-${checkpointId}/${name}`;
    this.files.set(uri, bytes);
    return { uri, size: bytes.length };
  }

  async read(handle: StreamStateHandle, range?: { readonly offset: number; readonly length: number }): Promise<Uint8Array> {
    const bytes = this.files.get(handle.uri);
    if (bytes === undefined) throw new Error(`no checkpoint file ${handle.uri}`);
    return range === undefined ? bytes : bytes.subarray(range.offset, range.offset + range.length);
  }

  async writeMetadata(checkpointId: number, metadata: Uint8Array): Promise<string> {
    return (await this.write(checkpointId, '_metadata', metadata)).uri;
  }

  async readMetadata(pointer: string): Promise<Uint8Array> {
    return this.read({ uri: pointer, size: 0 });
  }

  /**
   * Writes a state file of checkpoint `checkpointId` outside the job's folder, as an entropy-injected key
   * is (`memory:///<entropy>/…`): only its handle finds it again.
   */
  async writeElsewhere(checkpointId: number, name: string, bytes: Uint8Array, entropy: string): Promise<StreamStateHandle> {
    const uri = `${this.base.replace('memory:///', `memory:///${entropy}/`)}/chk-${checkpointId}/${name}`;
    this.files.set(uri, bytes);
    return { uri, size: bytes.length };
  }

  async discardCheckpoint(checkpointId: number, ownFiles: readonly StreamStateHandle[] = []): Promise<void> {
    for (const uri of [...this.files.keys()]) if (uri.startsWith(`${this.base}/chk-${checkpointId}/`)) this.files.delete(uri);
    for (const h of ownFiles) this.files.delete(h.uri);
  }

  async listFiles(): Promise<string[]> {
    return [...this.files.keys()].sort();
  }

  async deleteFiles(uris: readonly string[]): Promise<void> {
    for (const uri of uris) this.files.delete(uri);
  }

  async deleteShared(handles: readonly StreamStateHandle[]): Promise<void> {
    for (const h of handles) this.files.delete(h.uri);
  }

  /** The names of the files that exist, relative to the job's folder (or the full URI of one outside it), sorted. */
  names(): string[] {
    return [...this.files.keys()].map((uri) => (uri.startsWith(`${this.base}/`) ? uri.slice(this.base.length + 1) : uri)).sort();
  }
}
