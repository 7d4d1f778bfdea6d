// The part files of a streaming file sink on the local filesystem. A part in progress is the hidden file
// `<target>/.part-<subtask>-<n>.inprogress.<attemptId>`; rolling it fsyncs it and links it to its final
// name `part-<subtask>-<n>` (a link never replaces an existing file, unlike a rename), then removes the
// hidden name: a reader listing the target sees a part whole or not at all. A part never rolled (a
// cancelled or failed task) stays behind under its hidden name. A checkpoint's pending part is the closed
// hidden file; its commit links it to the name fixed when it opened, and finds a part committed before (the
// name links the same file, or the hidden name is gone) done already.
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { errorCode, pathError } from '../blob/output-rules.js';
import { FloeError } from '../core/errors.js';
import {
  inProgressPartName,
  nextRollingPartNumber,
  rollingPartName,
  rollingPartNumber,
  type InProgressPart,
  type PendingPart,
  type RollingPartFiles,
} from '../blob/rolling-parts.js';
import { makeDirectories, nodeOutputFs, type OutputFs } from './output-fs.js';

/** Makes the target folder (one level at a time) and numbers parts after those it holds for the subtask. */
export async function openFsRollingParts(
  target: string,
  subtaskIndex: number,
  attemptId: string,
  fs: OutputFs = nodeOutputFs,
  firstNumber = 0,
): Promise<RollingPartFiles> {
  await makeDirectories(fs, target);
  let names: string[];
  try {
    names = await fs.readdir(target);
  } catch (error) {
    throw pathError('listing the sink target', target, error);
  }
  let next = nextRollingPartNumber(names, subtaskIndex, firstNumber);
  return {
    async openPart(): Promise<InProgressPart> {
      const n = next++;
      const hidden = join(target, inProgressPartName(subtaskIndex, n, attemptId));
      let handle: fsp.FileHandle;
      try {
        handle = await fsp.open(hidden, 'wx');
      } catch (error) {
        throw pathError('creating the in-progress part file', hidden, error);
      }
      let size = 0;
      let open = true;
      const name = rollingPartName(subtaskIndex, n);
      const closeHandle = async (): Promise<void> => {
        if (!open) return;
        open = false;
        await handle.close();
      };
      return {
        name,
        get size() {
          return size;
        },
        async write(text: string): Promise<void> {
          await handle.write(text);
          size += Buffer.byteLength(text);
        },
        async commit(): Promise<string> {
          try {
            await handle.sync();
          } catch (error) {
            throw pathError('syncing the part file', hidden, error);
          }
          await closeHandle();
          // The name is taken only by a link that fails on an existing file: the next free number then.
          for (let number = n; ; number = next++) {
            const name = rollingPartName(subtaskIndex, number);
            try {
              await fsp.link(hidden, join(target, name));
            } catch (error) {
              if (errorCode(error) === 'EEXIST') continue;
              throw pathError('publishing the part file', join(target, name), error);
            }
            await fsp.unlink(hidden).catch((error: unknown) => {
              throw pathError('removing the in-progress name of', hidden, error);
            });
            await syncFolder(target);
            return name;
          }
        },
        async closeForCommit(): Promise<PendingPart> {
          try {
            await handle.sync();
          } catch (error) {
            throw pathError('syncing the part file', hidden, error);
          }
          await closeHandle();
          return { name, ref: inProgressPartName(subtaskIndex, n, attemptId), size };
        },
        async abandon(): Promise<void> {
          await closeHandle().catch(() => undefined);
        },
      };
    },
    commitPending: (part) => commitFsPending(target, part),
    async removeLeftovers(owns, keep): Promise<string[]> {
      let names: string[];
      try {
        names = await fs.readdir(target);
      } catch (error) {
        throw pathError('listing the sink target', target, error);
      }
      const removed: string[] = [];
      for (const name of names) {
        if (!name.startsWith('.') || !name.includes('.inprogress.') || keep.has(name)) continue;
        const subtask = /^\.part-(\d+)-\d+\.inprogress\./.exec(name)?.[1];
        if (subtask === undefined || rollingPartNumber(name, Number(subtask)) === undefined || !owns(Number(subtask))) continue;
        await fsp.unlink(join(target, name)).catch((error: unknown) => {
          if (errorCode(error) !== 'ENOENT') throw pathError('removing the leftover in-progress part', join(target, name), error);
        });
        removed.push(name);
      }
      return removed;
    },
  };
}

/** Links a pending part's hidden file to its name, unless that was done before; then drops the hidden name. */
async function commitFsPending(target: string, part: PendingPart): Promise<void> {
  const hidden = join(target, part.ref);
  const visible = join(target, part.name);
  try {
    await fsp.link(hidden, visible);
  } catch (error) {
    const code = errorCode(error);
    if (code !== 'EEXIST' && code !== 'ENOENT') throw pathError('publishing the part file', visible, error);
    const [h, v] = await Promise.all([fsp.stat(hidden).catch(() => undefined), fsp.stat(visible).catch(() => undefined)]);
    if (v === undefined) {
      throw new FloeError(
        'OUTPUT_TARGET',
        `cannot commit the part '${visible}': its pending file '${hidden}' is gone and no part of that name exists; something removed the sink's hidden file before its checkpoint's commit`,
      );
    }
    // The name holds another file (not this part's): never replaced.
    if (h !== undefined && (h.ino !== v.ino || h.dev !== v.dev)) {
      throw new FloeError(
        'OUTPUT_TARGET',
        `cannot commit the part '${visible}': a file of that name was written while the part was pending, and a file sink never replaces one; the part's data stays in '${hidden}'`,
      );
    }
  }
  await fsp.unlink(hidden).catch((error: unknown) => {
    if (errorCode(error) !== 'ENOENT') throw pathError('removing the in-progress name of', hidden, error);
  });
  await syncFolder(target);
}

/** Makes the folder's new entries durable; a filesystem that cannot sync a folder is left as it is. */
async function syncFolder(dir: string): Promise<void> {
  let handle: fsp.FileHandle | undefined;
  try {
    handle = await fsp.open(dir, 'r');
    await handle.sync();
  } catch {
    // Some filesystems refuse fsync on a folder (EINVAL, EISDIR): the file itself is synced.
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
