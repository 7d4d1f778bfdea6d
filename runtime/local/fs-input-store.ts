// InputStore on the local filesystem: a text source reads the TaskExecutor's own disk.
import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ByteStream, InputFile, InputStore } from '../blob/input-store.js';
import { errorMessage, InputSourceError } from '../core/errors.js';

export class FsInputStore implements InputStore {
  /** The file itself, or a folder's regular files (not hidden, not `_`-prefixed), sorted by name. */
  async listFiles(path: string): Promise<InputFile[]> {
    let s;
    try {
      s = await stat(path);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new InputSourceError(`text source: '${path}' does not exist`);
      throw new InputSourceError(`text source: cannot open '${path}': ${errorMessage(error)}`);
    }
    if (s.isFile()) return [{ path, size: s.size, modifiedMs: Math.max(s.mtimeMs, s.ctimeMs) }];
    if (!s.isDirectory()) throw new InputSourceError(`text source: '${path}' is neither a file nor a folder`);
    let names: string[];
    try {
      names = (await readdir(path)).filter((n) => !n.startsWith('.') && !n.startsWith('_')).sort();
    } catch (error) {
      throw new InputSourceError(`text source: cannot list the folder '${path}': ${errorMessage(error)}`);
    }
    const files: InputFile[] = [];
    for (const name of names) {
      const child = join(path, name);
      const cs = await stat(child);
      if (cs.isFile()) files.push({ path: child, size: cs.size, modifiedMs: Math.max(cs.mtimeMs, cs.ctimeMs) });
    }
    return files;
  }

  /** The file streamed from `start`; `expectedEnd` does not matter locally, where reading on costs nothing extra. */
  read(path: string, range: { readonly start: number; readonly chunkSizeBytes: number }): ByteStream {
    const stream = createReadStream(path, { start: range.start, highWaterMark: range.chunkSizeBytes });
    return {
      [Symbol.asyncIterator]: () => (stream as AsyncIterable<Uint8Array>)[Symbol.asyncIterator](),
      close: () => stream.destroy(),
    };
  }
}
