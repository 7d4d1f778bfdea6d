import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConflictError, InvalidRequestError } from '../../runtime/core/errors.js';
import { FsBlobStore } from '../../runtime/local/fs-blob-store.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-fs-blob-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('FsBlobStore', () => {
  const root = join(dir, 'root');
  const store = new FsBlobStore(root);
  const data = new TextEncoder().encode('x');

  it('rejects keys that would leave its folder or are not plain relative paths', async () => {
    writeFileSync(join(dir, 'secret'), 'outside');
    for (const key of ['../secret', 'a/../../secret', '/etc/passwd', 'a//b', './a', 'a/.', 'a/', '', 'a\\..\\b', 'C:/x', 'a\u0000b']) {
      await expect(store.put(key, data), key).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.get(key), key).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.exists(key), key).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(store.delete(key), key).rejects.toBeInstanceOf(InvalidRequestError);
    }
    await expect(store.list('../')).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(store.list('/etc/')).rejects.toBeInstanceOf(InvalidRequestError);
    expect(readdirSync(dir).sort()).toEqual(['secret']);
  });

  it('the error says what a key should look like', async () => {
    await expect(store.put('../x', data)).rejects.toThrow(/relative paths that stay inside the store/);
  });

  it('keeps files under the root at the key path, leaving no temp files behind', async () => {
    await store.put('jobs/j1/jobgraph.json', data);
    expect(readdirSync(join(root, 'jobs', 'j1'))).toEqual(['jobgraph.json']);
  });

  it('does not list a write in progress, and refuses keys that look like one', async () => {
    writeFileSync(join(root, 'jobs', 'j1', '.floe-tmp-123-abc'), 'partial');
    expect(await store.list('jobs/j1/')).toEqual(['jobs/j1/jobgraph.json']);
    await expect(store.put('jobs/.floe-tmp-1', data)).rejects.toBeInstanceOf(InvalidRequestError);
  });

  it('reports a key that is both a blob and a folder of blobs as a conflict', async () => {
    await store.put('a/b', data);
    await expect(store.put('a/b/c', data)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.put('a', data)).rejects.toBeInstanceOf(ConflictError);
    expect(await store.get('a')).toBeUndefined();
    expect(await store.exists('a')).toBe(false);
    expect(await store.list('a')).toEqual(['a/b']);
  });

  it("two stores on one folder (two processes) see each other's blobs", async () => {
    const other = new FsBlobStore(root);
    await store.put('shared/k', data);
    expect(await other.exists('shared/k')).toBe(true);
    await other.delete('shared/k');
    expect(await store.get('shared/k')).toBeUndefined();
  });
});
