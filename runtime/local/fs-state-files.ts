// Checkpoint files on local paths (`file:///abs/path` or `/abs/path`): a write goes to a temporary file
// beside its target, renamed into place, so a reader sees the whole file or none.
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { StateFileNotFoundError, type StateFileStore, type StateFileWriter } from '../blob/state-files.js';

const FILE_SCHEME = 'file://';

/** The local path of a `file://` URI or of a path. */
export const localPathOf = (uri: string): string => (uri.startsWith(FILE_SCHEME) ? uri.slice(FILE_SCHEME.length) : uri);

/** A write's temporary file ends so; a dot name, so that readers of a folder skip it. */
const TEMPORARY_SUFFIX = '.inprogress';

/** A dot name in the same folder: the rename stays on one file system, and listings skip it. */
const temporaryBeside = (path: string): string => join(dirname(path), `.${randomBytes(6).toString('hex')}${TEMPORARY_SUFFIX}`);

const isMissing = (error: unknown): boolean => (error as NodeJS.ErrnoException).code === 'ENOENT';

export class FsStateFileStore implements StateFileStore {
  write(uri: string, bytes: Uint8Array): Promise<void> {
    return this.writeWhole(uri, bytes);
  }

  async writeParts(uri: string, parts: readonly Uint8Array[]): Promise<void> {
    if (parts.length === 1) {
      await this.writeWhole(uri, parts[0]!);
      return;
    }
    const writer = await this.openWriter(uri);
    try {
      for (const part of parts) await writer.append(part);
    } catch (error) {
      await writer.abort();
      throw error;
    }
    await writer.close();
  }

  /** The file in a temporary beside it, piece by piece as they come, renamed into place at the close. */
  async openWriter(uri: string): Promise<StateFileWriter> {
    const path = localPathOf(uri);
    await mkdir(dirname(path), { recursive: true });
    const temporary = temporaryBeside(path);
    const file = await open(temporary, 'w');
    let isOpen = true;
    const closeFile = async (): Promise<void> => {
      if (!isOpen) return;
      isOpen = false;
      await file.close();
    };
    return {
      append: async (bytes) => {
        for (let done = 0; done < bytes.length;) done += (await file.write(bytes, done, bytes.length - done)).bytesWritten;
      },
      close: async () => {
        try {
          await closeFile();
          await rename(temporary, path);
        } catch (error) {
          await rm(temporary, { force: true });
          throw error;
        }
      },
      abort: async () => {
        try {
          await closeFile();
        } finally {
          await rm(temporary, { force: true });
        }
      },
    };
  }

  private async writeWhole(uri: string, bytes: Uint8Array): Promise<void> {
    const path = localPathOf(uri);
    await mkdir(dirname(path), { recursive: true });
    const temporary = temporaryBeside(path);
    try {
      await writeFile(temporary, bytes);
      await rename(temporary, path);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
  }

  async read(uri: string, range?: { readonly offset: number; readonly length: number }, into?: Uint8Array): Promise<Uint8Array> {
    const path = localPathOf(uri);
    try {
      if (range === undefined) return new Uint8Array(await readFile(path));
      const file = await open(path, 'r');
      try {
        const out = into !== undefined && into.length >= range.length ? into.subarray(0, range.length) : new Uint8Array(range.length);
        let got = 0;
        while (got < range.length) {
          const { bytesRead } = await file.read(out, got, range.length - got, range.offset + got);
          if (bytesRead === 0) break;
          got += bytesRead;
        }
        return got === range.length ? out : out.subarray(0, got);
      } finally {
        await file.close();
      }
    } catch (error) {
      if (isMissing(error)) throw new StateFileNotFoundError(uri, { cause: error });
      throw error;
    }
  }

  async delete(uris: readonly string[]): Promise<void> {
    for (const uri of uris) {
      await unlink(localPathOf(uri)).catch((error: unknown) => {
        if (!isMissing(error)) throw error;
      });
    }
  }

  async deleteFolder(uri: string): Promise<void> {
    await rm(localPathOf(uri), { recursive: true, force: true });
  }

  /**
   * Also lists the temporaries of writes that never ended (their writer killed), so that the end-of-job
   * cleanup, which runs when no task of the job writes, deletes them too.
   */
  async list(uri: string): Promise<string[]> {
    const root = localPathOf(uri);
    const prefix = uri.startsWith(FILE_SCHEME) ? FILE_SCHEME : '';
    let entries;
    try {
      entries = await readdir(root, { recursive: true, withFileTypes: true });
    } catch (error) {
      if (isMissing(error) || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
      throw error;
    }
    return entries
      .filter((e) => e.isFile() && (!e.name.startsWith('.') || e.name.endsWith(TEMPORARY_SUFFIX)))
      .map((e) => `${prefix}${join(e.parentPath, e.name)}`)
      .sort();
  }
}
