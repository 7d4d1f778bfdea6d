import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NotFoundError } from '../../runtime/core/errors.js';
import { blobKeys } from '../../runtime/blob/blob-store.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { LibraryCache } from '../../runtime/taskexecutor/library-cache.js';

const root = mkdtempSync(join(tmpdir(), 'floe-library-cache-'));
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
    await store.put(blobKeys.library('abc'), new Uint8Array([1, 2, 3]));
    const cache = new LibraryCache(store, join(root, 'b'));
    const answers = await Promise.all([cache.get('abc'), cache.get('abc'), cache.get('abc')]);
    expect(answers.map((a) => [...a])).toEqual([[1, 2, 3], [1, 2, 3], [1, 2, 3]]);
    await cache.get('abc');
    expect(store.reads).toBe(1);
  });

  it('says which library is missing, and asks the store again next time', async () => {
    const store = new CountingBlobStore();
    const cache = new LibraryCache(store, join(root, 'c'));
    const error = await cache.get('missing').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toBe(`library missing is not in the blob store (key ${blobKeys.library('missing')}); resubmit the job with its library`);
    await store.put(blobKeys.library('missing'), new Uint8Array([7]));
    expect([...(await cache.get('missing'))]).toEqual([7]);
    expect(store.reads).toBe(2);
  });

  it('does not keep a failed read: the next ask reads again', async () => {
    const store = new CountingBlobStore();
    await store.put(blobKeys.library('lib'), new Uint8Array([9]));
    store.failNext = 1;
    const cache = new LibraryCache(store, join(root, 'd'));
    await expect(cache.get('lib')).rejects.toThrow('store unreachable');
    expect([...(await cache.get('lib'))]).toEqual([9]);
    expect(store.reads).toBe(2);
  });
});
