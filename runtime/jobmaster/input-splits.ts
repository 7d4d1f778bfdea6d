// Splits of text file sources, handed out lazily: a fast subtask simply asks for more.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { CONFIG_OPTIONS } from '../core/config.js';
import { withOpenDeadline } from '../core/deadline.js';
import { errorMessage, InvalidRequestError } from '../core/errors.js';
import type { InputSplit } from '../protocol/task-deployment.js';

/**
 * Files of a source path: the file itself, or a folder's regular files (not hidden), sorted. The whole
 * listing must answer within `timeoutMs` ('execution.file-open.timeout'): a hung filesystem fails the
 * job naming the path instead of leaving it RUNNING with nothing to do.
 */
export async function listInputFiles(path: string, timeoutMs: number = CONFIG_OPTIONS.fileOpenTimeoutMs.default, clock?: Clock): Promise<{ path: string; size: number }[]> {
  return withOpenDeadline(listFiles(path), { timeoutMs, what: `listing the files of text source '${path}'`, ...(clock !== undefined ? { clock } : {}) });
}

async function listFiles(path: string): Promise<{ path: string; size: number }[]> {
  let s;
  try {
    s = await stat(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InvalidRequestError(`text source: '${path}' does not exist`);
    throw new InvalidRequestError(`text source: cannot open '${path}': ${errorMessage(error)}`);
  }
  if (s.isFile()) return [{ path, size: s.size }];
  if (!s.isDirectory()) throw new InvalidRequestError(`text source: '${path}' is neither a file nor a folder`);
  let names: string[];
  try {
    names = (await readdir(path)).filter((n) => !n.startsWith('.') && !n.startsWith('_')).sort();
  } catch (error) {
    throw new InvalidRequestError(`text source: cannot list the folder '${path}': ${errorMessage(error)}`);
  }
  const files: { path: string; size: number }[] = [];
  for (const name of names) {
    const child = join(path, name);
    const cs = await stat(child);
    if (cs.isFile()) files.push({ path: child, size: cs.size });
  }
  return files;
}

export function createSplits(files: readonly { path: string; size: number }[], splitSizeBytes: number): InputSplit[] {
  const splits: InputSplit[] = [];
  for (const file of files) {
    for (let start = 0; start < file.size; start += splitSizeBytes) {
      splits.push({ splitNumber: splits.length, path: file.path, start, length: Math.min(splitSizeBytes, file.size - start) });
    }
  }
  return splits;
}

/**
 * Hands out one source vertex's splits in order; a finished job has handed out all of them. A source
 * vertex always restarts as a whole (regions are made of whole vertices), so a restart hands out every
 * split again.
 */
export class SplitAssigner {
  private next = 0;
  constructor(readonly splits: readonly InputSplit[]) {}

  nextSplit(): InputSplit | null {
    const split = this.splits[this.next];
    if (split === undefined) return null;
    this.next++;
    return split;
  }

  /** Every split back in line: the source vertex runs again from the start. */
  reset(): void {
    this.next = 0;
  }

  get remaining(): number {
    return this.splits.length - this.next;
  }
}
