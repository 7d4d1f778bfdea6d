import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { blobKeys, sha256Hex } from '../../runtime/blob/blob-store.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { LibraryCache } from '../../runtime/taskexecutor/library-cache.js';

const root = mkdtempSync(join(tmpdir(), 'floe-library-cache-'));
/** Stores `bytes` as a library under their own hash, as the Dispatcher does. */
async function storeLibrary(store: InMemoryBlobStore, bytes: Uint8Array): Promise<string> {
  const sha256 = sha256Hex(bytes);
  await store.put(blobKeys.library(sha256), bytes);
  return sha256;
}
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Counts the reads that reach the store, and can fail the next ones. */
class CountingBlobStore extends InMemoryBlobStore {
  reads = 0;
  failNext = 0;
  override async get(key: string): Promise<Uint8Array | undefined> {
    this.reads++;
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('store unreachable');
    }
    return super.get(key);
  }
}

describe('LibraryCache', () => {
  it('creates its folder', async () => {
    const dir = join(root, 'a', 'libraries');
    await new LibraryCache(new InMemoryBlobStore(), dir).init();
    expect(existsSync(dir)).toBe(true);
  });

  it('reads a library from the BlobStore once, however many tasks ask at once or later', async () => {
    const store = new CountingBlobStore();
    const sha256 = await storeLibrary(store, new Uint8Array([1, 2, 3]));
    const cache = new LibraryCache(store, join(root, 'b'));
    const answers = await Promise.all([cache.get(sha256), cache.get(sha256), cache.get(sha256)]);
    expect(answers.map((a) => [...a])).toEqual([
      [1, 2, 3],
      [1, 2, 3],
      [1, 2, 3],
    ]);
    await cache.get(sha256);
    expect(store.reads).toBe(1);
  });

  it('says which library is missing, and asks the store again next time', async () => {
    const store = new CountingBlobStore();
    const cache = new LibraryCache(store, join(root, 'c'));
    const missing = sha256Hex(new Uint8Array([7]));
    const error = await cache.get(missing).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'LIBRARY_MISSING' });
    expect((error as Error).message).toBe(`library ${missing} is not in the blob store (key ${blobKeys.library(missing)}); resubmit the job with its library`);
    await storeLibrary(store, new Uint8Array([7]));
    expect([...(await cache.get(missing))]).toEqual([7]);
    expect(store.reads).toBe(2);
  });

  it('does not keep a failed read: the next ask reads again', async () => {
    const store = new CountingBlobStore();
    const sha256 = await storeLibrary(store, new Uint8Array([9]));
    store.failNext = 1;
    const cache = new LibraryCache(store, join(root, 'd'));
    await expect(cache.get(sha256)).rejects.toThrow('store unreachable');
    expect([...(await cache.get(sha256))]).toEqual([9]);
    expect(store.reads).toBe(2);
  });

  it('refuses bytes put under a library key after the fact (an upload of other bytes), naming both hashes, and reads again next time', async () => {
    const store = new CountingBlobStore();
    const library = new TextEncoder().encode('export const library = 1;');
    const sha256 = sha256Hex(library);
    const other = new TextEncoder().encode('export const other = 2;');
    await store.put(blobKeys.library(sha256), other);
    const cache = new LibraryCache(store, join(root, 'e'));
    await expect(cache.get(sha256)).rejects.toThrow(`the object stored as library ${sha256} (key ${blobKeys.library(sha256)}) has sha256 ${sha256Hex(other)}`);
    await store.put(blobKeys.library(sha256), library);
    expect(Buffer.from(await cache.get(sha256)).toString()).toBe('export const library = 1;');
    expect(store.reads).toBe(2);
  });
});
