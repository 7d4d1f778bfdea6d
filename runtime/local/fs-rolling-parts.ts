// The part files of a streaming file sink on the local filesystem. A part in progress is the hidden file
// `<target>/.part-<subtask>-<n>.inprogress.<attemptId>`; rolling it fsyncs it and links it to its final
// name `part-<subtask>-<n>` (a link never replaces an existing file, unlike a rename), then removes the
// hidden name: a reader listing the target sees a part whole or not at all. A part never rolled (a
// cancelled or failed task) stays behind under its hidden name.
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { errorCode, pathError } from '../blob/output-rules.js';
import { inProgressPartName, nextRollingPartNumber, rollingPartName, type InProgressPart, type RollingPartFiles } from '../blob/rolling-parts.js';
import { makeDirectories, nodeOutputFs, type OutputFs } from './output-fs.js';

/** Makes the target folder (one level at a time) and numbers parts after those it holds for the subtask. */
export async function openFsRollingParts(target: string, subtaskIndex: number, attemptId: string, fs: OutputFs = nodeOutputFs): Promise<RollingPartFiles> {
  await makeDirectories(fs, target);
  let names: string[];
  try {
    names = await fs.readdir(target);
  } catch (error) {
    throw pathError('listing the sink target', target, error);
  }
  let next = nextRollingPartNumber(names, subtaskIndex);
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
      const closeHandle = async (): Promise<void> => {
        if (!open) return;
        open = false;
        await handle.close();
      };
      return {
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
        async abandon(): Promise<void> {
          await closeHandle().catch(() => undefined);
        },
      };
    },
  };
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
