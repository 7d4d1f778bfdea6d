// The filesystem calls the local output stores make (FsOutputStore, the streaming sink's part files), as
// a small interface tests wrap to fail at a chosen step, and the one-level-at-a-time mkdir they share.
import type { Stats } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { dirname } from 'node:path';
import { FloeError } from '../core/errors.js';
import { errorCode, kindOf, pathError } from '../blob/output-rules.js';

/** The filesystem calls the store makes. Tests wrap them to fail at a chosen step. */
export interface OutputFs {
  lstat(path: string): Promise<Stats>;
  stat(path: string): Promise<Stats>;
  readdir(path: string): Promise<string[]>;
  /** One folder, never recursive. */
  mkdir(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  /** Recursive, and quiet when `path` is gone. */
  remove(path: string): Promise<void>;
  readFile(path: string): Promise<string>;
  /** Writes and fsyncs a new file (replacing one of that name). */
  writeFileSynced(path: string, text: string): Promise<void>;
}

export const nodeOutputFs: OutputFs = {
  lstat: (p) => fsp.lstat(p),
  stat: (p) => fsp.stat(p),
  readdir: (p) => fsp.readdir(p),
  mkdir: async (p) => {
    await fsp.mkdir(p);
  },
  rename: (a, b) => fsp.rename(a, b),
  remove: (p) => fsp.rm(p, { recursive: true, force: true }),
  readFile: (p) => fsp.readFile(p, 'utf8'),
  async writeFileSynced(p, text) {
    const handle = await fsp.open(p, 'w');
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
};

/**
 * Creates `dir` and its missing parents one folder at a time. `mkdir({ recursive: true })` spins forever
 * on a path under /proc (each level answers ENOENT and it starts over); one level at a time fails at once,
 * naming the folder that cannot be made.
 */
export async function makeDirectories(fs: OutputFs, dir: string): Promise<void> {
  const missing: string[] = [];
  for (let p = dir; ;) {
    let s: Stats | undefined;
    try {
      s = await fs.stat(p);
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw pathError('looking at', p, error);
    }
    if (s !== undefined) {
      if (!s.isDirectory()) throw new FloeError('IO', `cannot create '${dir}': '${p}' is ${kindOf(s)}, not a folder`);
      break;
    }
    missing.push(p);
    const parent = dirname(p);
    if (parent === p) break;
    p = parent;
  }
  for (const p of missing.reverse()) {
    try {
      await fs.mkdir(p);
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') throw pathError('creating the folder', p, error);
    }
  }
}
