// Text file sinks write into a staging folder beside the target; only a FINISHED job moves the
// finished attempts' part files to the target, so a failed or canceled job leaves it untouched.
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export function stagingDirFor(targetPath: string, jobId: string): string {
  return join(dirname(targetPath), `.${basename(targetPath)}.staging-${jobId}`);
}

export function attemptStagingDir(targetPath: string, jobId: string, attemptId: string): string {
  return join(stagingDirFor(targetPath, jobId), attemptId);
}

const exists = async (p: string): Promise<boolean> => stat(p).then(() => true, () => false);

/**
 * Moves `part-<i>` of each subtask's finished attempt into the target folder. The target is
 * replaced as a whole: the new folder is assembled inside the staging area, then renamed in.
 */
export async function commitTextSink(targetPath: string, jobId: string, finishedAttempts: readonly string[]): Promise<void> {
  const staging = stagingDirFor(targetPath, jobId);
  const assembled = join(staging, '_committed');
  await mkdir(assembled, { recursive: true });
  for (const [subtask, attemptId] of finishedAttempts.entries()) {
    const part = join(staging, attemptId, `part-${subtask}`);
    if (await exists(part)) await rename(part, join(assembled, `part-${subtask}`));
  }
  if (await exists(targetPath)) {
    const old = join(staging, '_previous');
    await rename(targetPath, old);
  }
  await rename(assembled, targetPath);
  await rm(staging, { recursive: true, force: true });
}

export async function discardTextSink(targetPath: string, jobId: string): Promise<void> {
  await rm(stagingDirFor(targetPath, jobId), { recursive: true, force: true });
}
