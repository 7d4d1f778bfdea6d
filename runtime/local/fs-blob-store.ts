// BlobStore on the local filesystem: one file per key under a root folder. A write goes to a temp file
// in the key's own folder and is renamed into place, so readers see the whole blob or none.
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { ConflictError, InvalidRequestError } from '../core/errors.js';
import type { BlobStore } from '../blob/blob-store.js';

/** Names of in-flight writes; never a key's last segment, so `list` can skip them. */
const TEMP_PREFIX = '.floe-tmp-';

export class FsBlobStore implements BlobStore {
  private readonly root: string;

  constructor(rootDir: string) {
    this.root = resolve(rootDir);
  }

  async put(key: string, data: Uint8Array): Promise<void> {
    const path = this.pathOf(key);
    const dir = path.slice(0, path.lastIndexOf(sep));
    const temp = join(dir, `${TEMP_PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`);
    try {
      await mkdir(dir, { recursive: true });
      const handle = await open(temp, 'wx');
      try {
        await handle.writeFile(data);
        // Flushed before the rename, so a crash cannot leave a renamed but empty blob behind.
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
    } catch (error) {
      await rm(temp, { force: true }).catch(() => undefined);
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST') {
        throw new ConflictError(`cannot store blob '${key}': a part of its path is already a blob or a prefix of other blobs; pick a key that is not both`);
      }
      throw error;
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const buf = await readFile(this.pathOf(key));
      // A plain Uint8Array, as from the other adapters: Buffer's extras (and its toEqual quirks) stay out.
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    } catch (error) {
      if (isAbsent(error)) return undefined;
      throw error;
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (error) {
      if (isAbsent(error)) return false;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.pathOf(key));
    } catch (error) {
      if (!isAbsent(error) && (error as NodeJS.ErrnoException).code !== 'EISDIR') throw error;
    }
  }

  async list(prefix: string): Promise<string[]> {
    if (typeof prefix !== 'string') throw new InvalidRequestError(`blob prefix must be a string, found ${JSON.stringify(prefix)}`);
    // Prefixes match like string prefixes (as in S3): 'jobs/a' matches 'jobs/a/x' and 'jobs/ab'.
    // Only the folder part is walked; its segments must be safe just like a key's.
    const slash = prefix.lastIndexOf('/');
    const folder = slash < 0 ? '' : prefix.slice(0, slash);
    if (folder !== '') checkSegments(folder, 'blob prefix');
    const keys: string[] = [];
    await this.walk(folder === '' ? this.root : join(this.root, ...folder.split('/')), folder, prefix, keys);
    return keys.sort();
  }

  async close(): Promise<void> {}

  private async walk(dir: string, keyPrefix: string, wanted: string, out: string[]): Promise<void> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isAbsent(error)) return;
      throw error;
    }
    for (const entry of entries) {
      const key = keyPrefix === '' ? entry.name : `${keyPrefix}/${entry.name}`;
      if (entry.isDirectory()) {
        // Descend only where keys below can still match the prefix.
        if (wanted.startsWith(`${key}/`) || `${key}/`.startsWith(wanted)) await this.walk(join(dir, entry.name), key, wanted, out);
      } else if (entry.isFile() && !entry.name.startsWith(TEMP_PREFIX) && key.startsWith(wanted)) {
        out.push(key);
      }
    }
  }

  private pathOf(key: string): string {
    if (typeof key !== 'string' || key === '') throw new InvalidRequestError(`blob key must be a non-empty string, found ${JSON.stringify(key)}`);
    checkSegments(key, 'blob key');
    const last = key.slice(key.lastIndexOf('/') + 1);
    if (last.startsWith(TEMP_PREFIX))
      throw new InvalidRequestError(`blob key '${key}' must not have a last segment starting with '${TEMP_PREFIX}' (reserved for writes in progress)`);
    const path = join(this.root, ...key.split('/'));
    // Belt and braces after the segment checks: whatever the key, the file stays under the root.
    if (!path.startsWith(this.root + sep)) throw new InvalidRequestError(`blob key '${key}' resolves outside the store's folder`);
    return path;
  }
}

function checkSegments(key: string, what: string): void {
  if (key.startsWith('/') || /^[A-Za-z]:/.test(key)) {
    throw new InvalidRequestError(`${what} '${key}' must be a relative path with '/' separators, found an absolute path`);
  }
  if (key.includes('\\') || key.includes('\0')) throw new InvalidRequestError(`${what} '${key}' must not contain backslashes or NUL characters`);
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw new InvalidRequestError(
        `${what} '${key}' has an empty, '.' or '..' segment; keys are relative paths that stay inside the store, like 'jobs/<id>/jobgraph.json'`,
      );
    }
  }
}

function isAbsent(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}
