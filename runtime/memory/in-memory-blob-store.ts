// BlobStore kept in a Map: the reference adapter for unit tests and single-process setups.
import { InvalidRequestError } from '../core/errors.js';
import type { BlobStore } from '../blob/blob-store.js';

export class InMemoryBlobStore implements BlobStore {
  private readonly blobs = new Map<string, Uint8Array>();

  async put(key: string, data: Uint8Array): Promise<void> {
    assertKey(key);
    // Copy so a caller reusing its buffer cannot change what was stored.
    this.blobs.set(key, Uint8Array.from(data));
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    assertKey(key);
    const data = this.blobs.get(key);
    return data === undefined ? undefined : Uint8Array.from(data);
  }

  async exists(key: string): Promise<boolean> {
    assertKey(key);
    return this.blobs.has(key);
  }

  async delete(key: string): Promise<void> {
    assertKey(key);
    this.blobs.delete(key);
  }

  async list(prefix: string): Promise<string[]> {
    return [...this.blobs.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  async close(): Promise<void> {}
}

function assertKey(key: string): void {
  if (typeof key !== 'string' || key === '') throw new InvalidRequestError(`blob key must be a non-empty string, found ${JSON.stringify(key)}`);
}
