// The BlobStore contract: what every adapter (in-memory, filesystem, S3) promises the Dispatcher and workers.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { putContentAddressed, sha256Hex, type BlobStore } from '../../runtime/blob/blob-store.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined): string | undefined => (b === undefined ? undefined : new TextDecoder().decode(b));

export function describeBlobStoreContract(name: string, factory: () => Promise<BlobStore>): void {
  describe(`BlobStore contract: ${name}`, () => {
    let store: BlobStore;
    let seq = 0;
    // Keys under a fresh prefix per test keep adapters whose state outlives the store (a shared bucket) honest.
    let p: string;

    beforeEach(async () => {
      store = await factory();
      p = `contract-${Date.now().toString(36)}-${seq++}/`;
    });
    afterEach(async () => {
      await store.close();
    });

    it('stores bytes and reads them back exactly', async () => {
      const data = Uint8Array.from({ length: 256 }, (_, i) => i);
      await store.put(`${p}jobs/j1/jobgraph.json`, data);
      const got = await store.get(`${p}jobs/j1/jobgraph.json`);
      expect(got).toBeInstanceOf(Uint8Array);
      expect(Buffer.from(got!).equals(Buffer.from(data))).toBe(true);
    });

    it('stores an empty blob', async () => {
      await store.put(`${p}empty`, new Uint8Array(0));
      expect(await store.exists(`${p}empty`)).toBe(true);
      expect((await store.get(`${p}empty`))?.byteLength).toBe(0);
    });

    it('stores a blob of several megabytes', async () => {
      const big = new Uint8Array(6 * 1024 * 1024);
      for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) % 251;
      await store.put(`${p}big`, big);
      expect(sha256Hex((await store.get(`${p}big`))!)).toBe(sha256Hex(big));
    });

    it('get and exists report an absent key without throwing', async () => {
      expect(await store.get(`${p}nothing`)).toBeUndefined();
      expect(await store.exists(`${p}nothing`)).toBe(false);
    });

    it('a put replaces the previous blob under the key', async () => {
      await store.put(`${p}k`, bytes('one'));
      await store.put(`${p}k`, bytes('two, longer'));
      await store.put(`${p}k`, bytes('3'));
      expect(text(await store.get(`${p}k`))).toBe('3');
    });

    it('what was stored does not change when the caller reuses its buffer', async () => {
      const buf = bytes('original');
      await store.put(`${p}k`, buf);
      buf.fill(0);
      const got = await store.get(`${p}k`);
      expect(text(got)).toBe('original');
      got!.fill(0);
      expect(text(await store.get(`${p}k`))).toBe('original');
    });

    it('delete removes the blob and is idempotent', async () => {
      await store.put(`${p}a/b`, bytes('x'));
      await store.delete(`${p}a/b`);
      expect(await store.exists(`${p}a/b`)).toBe(false);
      expect(await store.get(`${p}a/b`)).toBeUndefined();
      await store.delete(`${p}a/b`);
      await store.delete(`${p}never/was`);
    });

    it('list returns the keys under a prefix, sorted, as string prefixes', async () => {
      const keys = [
        `${p}jobs/b/result.json`,
        `${p}jobs/a/jobgraph.json`,
        `${p}jobs/ab/jobgraph.json`,
        `${p}jobs/a/result.json`,
        `${p}libraries/x.mjs`,
        `${p}jobsfile`,
      ];
      for (const k of keys) await store.put(k, bytes(k));
      expect(await store.list(`${p}jobs/a/`)).toEqual([`${p}jobs/a/jobgraph.json`, `${p}jobs/a/result.json`]);
      expect(await store.list(`${p}jobs/a`)).toEqual([`${p}jobs/a/jobgraph.json`, `${p}jobs/a/result.json`, `${p}jobs/ab/jobgraph.json`]);
      expect(await store.list(`${p}jobs`)).toEqual([
        `${p}jobs/a/jobgraph.json`,
        `${p}jobs/a/result.json`,
        `${p}jobs/ab/jobgraph.json`,
        `${p}jobs/b/result.json`,
        `${p}jobsfile`,
      ]);
      expect(await store.list(p)).toEqual([...keys].sort());
      expect(await store.list(`${p}nope/`)).toEqual([]);
      await store.delete(`${p}jobs/a/result.json`);
      expect(await store.list(`${p}jobs/a/`)).toEqual([`${p}jobs/a/jobgraph.json`]);
    });

    it('list with the empty prefix includes every key', async () => {
      await store.put(`${p}one`, bytes('1'));
      await store.put(`${p}two/three`, bytes('2'));
      const all = await store.list('');
      expect(all).toEqual(expect.arrayContaining([`${p}one`, `${p}two/three`]));
      expect(all).toEqual([...all].sort());
    });

    it('readers see a whole blob or none while it is being replaced', async () => {
      const size = 1024 * 1024;
      const versions = [new Uint8Array(size).fill(1), new Uint8Array(size).fill(2)].map((v) => Buffer.from(v));
      const key = `${p}atomic`;
      let writing = true;
      const writer = (async () => {
        try {
          for (let i = 0; i < 12; i++) await store.put(key, versions[i % 2]!);
        } finally {
          writing = false;
        }
      })();
      let reads = 0;
      const torn: string[] = [];
      while (writing) {
        const r = await store.get(key);
        reads++;
        // Before the first put completes there may be nothing; after, always one version whole.
        if (r !== undefined && !versions.some((v) => v.equals(r))) torn.push(`read ${reads}: ${r.byteLength} bytes, first byte ${r[0]}`);
      }
      await writer;
      expect(torn).toEqual([]);
      expect(reads).toBeGreaterThan(1);
      expect(versions[1]!.equals((await store.get(key))!)).toBe(true);
    });

    it('racing writers to one key leave exactly one of their blobs, whole', async () => {
      const size = 512 * 1024;
      const versions = [1, 2, 3, 4].map((v) => new Uint8Array(size).fill(v));
      await Promise.all(versions.map((v) => store.put(`${p}race`, v)));
      const got = (await store.get(`${p}race`))!;
      expect(got.byteLength).toBe(size);
      expect([1, 2, 3, 4]).toContain(got[0]);
      expect(Buffer.from(got).equals(Buffer.from(versions[got[0]! - 1]!))).toBe(true);
      // In-flight writes leave nothing behind that list would show.
      expect(await store.list(`${p}`)).toEqual([`${p}race`]);
    });

    it('content-addressed puts store a library once under its sha256', async () => {
      const lib = bytes('export default 42;');
      const sha = await putContentAddressed(store, lib);
      expect(sha).toBe(sha256Hex(lib));
      expect(await putContentAddressed(store, lib)).toBe(sha);
      expect(text(await store.get(`libraries/${sha}.mjs`))).toBe('export default 42;');
    });
  });
}
