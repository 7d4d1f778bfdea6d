// Splits of text file sources, handed out lazily: a fast subtask simply asks for more.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidRequestError } from '../core/errors.js';
import type { InputSplit } from '../protocol/task-deployment.js';

/** Files of a source path: the file itself, or a folder's regular files (not hidden), sorted. */
export async function listInputFiles(path: string): Promise<{ path: string; size: number }[]> {
  let s;
  try {
    s = await stat(path);
  } catch {
    throw new InvalidRequestError(`text file source: '${path}' does not exist`);
  }
  if (s.isFile()) return [{ path, size: s.size }];
  if (!s.isDirectory()) throw new InvalidRequestError(`text file source: '${path}' is neither a file nor a folder`);
  const names = (await readdir(path)).filter((n) => !n.startsWith('.') && !n.startsWith('_')).sort();
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
