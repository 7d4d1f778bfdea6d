// OutputStore on the local filesystem (embedded backend). Attempts stage `part-<i>` under
// `<parent>/.<name>.staging-<jobId>/<attemptId>/`, beside the target. A commit writes a journal there,
// assembles the committed folder (the final attempts' parts and the `_SUCCESS` manifest) in
// `<staging>/_committed`, re-checks the target, moves an earlier Floe output aside and renames the
// assembled folder into place: a reader sees the old output, no folder for a moment, or the new output,
// never part of one. What was moved aside goes only after the new folder is in place.
import type { Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { FloeError, OutputTargetError } from '../core/errors.js';
import type { WriteMode } from '../jobgraph/jobgraph.js';
import type { OutputStore, RollingPartFiles } from '../blob/output-store.js';
import {
  COMMIT_JOURNAL,
  encodeManifest,
  describePart,
  errorCode,
  expectedPart,
  fileTargetRefusal,
  kindOf,
  newJournal,
  OUTPUT_MANIFEST,
  OutputPartChangedError,
  parseJournal,
  parseManifest,
  partFile,
  pathError,
  refusalOf,
  type TargetCheckOptions,
  type CommitJournal,
  type CommitOutcome,
  type StagedPart,
  type TargetContent,
} from '../blob/output-rules.js';
import { openFsRollingParts } from './fs-rolling-parts.js';
import { makeDirectories, nodeOutputFs, type OutputFs } from './output-fs.js';

export { makeDirectories, nodeOutputFs, type OutputFs } from './output-fs.js';

export function localStagingDir(targetPath: string, jobId: string): string {
  return join(dirname(targetPath), `.${basename(targetPath)}.staging-${jobId}`);
}

export function localAttemptStagingDir(targetPath: string, jobId: string, attemptId: string): string {
  return join(localStagingDir(targetPath, jobId), attemptId);
}

/** The folder in the staging area where a commit assembles the output before renaming it into place. */
const ASSEMBLED = '_committed';
/** Earlier outputs moved aside during a commit: `_previous-<n>`. */
const PREVIOUS = '_previous-';

export class FsOutputStore implements OutputStore {
  readonly remote = false;

  constructor(
    private readonly fs: OutputFs = nodeOutputFs,
    private readonly now: () => number = Date.now,
  ) {}

  attemptStagingLocation(target: string, jobId: string, attemptId: string): string {
    return localAttemptStagingDir(target, jobId, attemptId);
  }

  async openAttemptStaging(stagingLocation: string): Promise<string> {
    await makeDirectories(this.fs, stagingLocation);
    return stagingLocation;
  }

  async uploadPart(): Promise<StagedPart> {
    throw new FloeError('INTERNAL', 'the local output store writes parts in place; nothing to upload');
  }

  async checkTarget(target: string, writeMode: WriteMode, jobId: string, options?: TargetCheckOptions): Promise<void> {
    const refusal = refusalOf(target, await this.contentOf(target), writeMode, jobId, [], options);
    if (refusal !== undefined) throw new OutputTargetError(refusal);
  }

  async commit(
    target: string,
    jobId: string,
    writeMode: WriteMode,
    finalAttempts: readonly string[],
    staged: readonly (StagedPart | undefined)[] = [],
  ): Promise<CommitOutcome> {
    const staging = localStagingDir(target, jobId);
    let journal = await this.readJournal(staging);
    const resumed = journal !== undefined;
    if (await this.holdsOutputOf(target, jobId)) {
      await this.fs.remove(staging);
      return 'already-committed';
    }
    if (journal === undefined) {
      const missing: string[] = [];
      for (const [subtask, attemptId] of finalAttempts.entries()) {
        const part = join(staging, attemptId, partFile(subtask));
        if (!(await this.exists(part))) missing.push(`subtask ${subtask} (attempt ${attemptId}): '${part}'`);
      }
      if (missing.length > 0) {
        throw new FloeError(
          'OUTPUT_MISSING',
          `cannot commit '${target}': finished attempts staged no part file for ${missing.join(', ')}; was the staging area removed while the job ran?`,
        );
      }
      journal = newJournal(target, jobId, writeMode, finalAttempts, [], staged);
      // The decision is durable before the first move: whoever commits next completes exactly this.
      const tmp = join(staging, `${COMMIT_JOURNAL}.tmp`);
      await this.fs.writeFileSynced(tmp, JSON.stringify(journal));
      await this.fs.rename(tmp, join(staging, COMMIT_JOURNAL));
    }

    const assembled = join(staging, ASSEMBLED);
    await this.assemble(staging, assembled, journal, finalAttempts, staged);

    // The target may have changed since submission (or since the last try).
    let content: TargetContent | undefined;
    let refusal: string | undefined;
    try {
      content = await this.contentOf(target);
      refusal = refusalOf(target, content, journal.writeMode, jobId);
    } catch (error) {
      if (!(error instanceof OutputTargetError)) throw error;
      refusal = error.message;
    }
    if (refusal !== undefined || content === undefined) {
      throw new OutputTargetError(
        `${refusal ?? `'${target}' cannot be written`}. The job's output is complete in '${assembled}'; move it where you want it, it is not deleted`,
      );
    }
    if (content.kind !== 'absent') {
      const aside = join(staging, `${PREVIOUS}${(await this.fs.readdir(staging)).filter((n) => n.startsWith(PREVIOUS)).length}`);
      await this.fs.rename(target, aside);
    }
    await this.fs.rename(assembled, target);
    await this.fs.remove(staging);
    return resumed ? 'resumed' : 'committed';
  }

  openRollingParts(target: string, subtaskIndex: number, attemptId: string, firstNumber = 0): Promise<RollingPartFiles> {
    return openFsRollingParts(target, subtaskIndex, attemptId, this.fs, firstNumber);
  }

  async discardAttempt(target: string, jobId: string, attemptId: string): Promise<void> {
    const staging = localStagingDir(target, jobId);
    const journal = await this.readJournal(staging);
    if (journal?.parts.some((p) => p.attemptId === attemptId)) {
      throw new FloeError('ATTEMPT_COMMITTING', `attempt ${attemptId} is part of the commit begun in '${staging}'; its output is not discarded`);
    }
    await this.fs.remove(join(staging, attemptId));
  }

  async discard(target: string, jobId: string): Promise<{ readonly kept?: string }> {
    const staging = localStagingDir(target, jobId);
    if ((await this.readJournal(staging)) !== undefined) return { kept: staging };
    await this.fs.remove(staging);
    return {};
  }

  /**
   * Moves each final part into the assembled folder (skipping those already there) and writes the
   * manifest. A part is moved only while it is the regular file of the size its task reported: nothing
   * is published before every part passed. Locally this refuses a mistaken or stray write only: user code
   * runs as the user who started the cluster and could change the part and its journal alike.
   */
  private async assemble(
    staging: string,
    assembled: string,
    journal: CommitJournal,
    givenAttempts: readonly string[],
    given: readonly (StagedPart | undefined)[],
  ): Promise<void> {
    try {
      await this.fs.mkdir(assembled);
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') throw pathError('creating the folder', assembled, error);
    }
    for (const part of journal.parts) {
      const to = join(assembled, part.file);
      if (await this.exists(to)) continue;
      const from = join(staging, part.attemptId, part.file);
      const expected = expectedPart(journal, part.subtask, givenAttempts, given);
      try {
        if (expected !== undefined) {
          const s = await this.fs.lstat(from);
          if (!s.isFile() || s.size !== expected.size) {
            throw new OutputPartChangedError(
              journal.target,
              part.subtask,
              part.attemptId,
              from,
              expected,
              s.isFile() ? describePart({ size: s.size }) : kindOf(s),
            );
          }
        }
        await this.fs.rename(from, to);
      } catch (error) {
        if (errorCode(error) === 'ENOENT') {
          throw new FloeError(
            'OUTPUT_MISSING',
            `cannot complete the commit of '${journal.target}': the part of subtask ${part.subtask} is neither at '${from}' nor at '${to}'`,
          );
        }
        throw error;
      }
    }
    await this.fs.writeFileSynced(
      join(assembled, OUTPUT_MANIFEST),
      encodeManifest(
        journal.jobId,
        journal.parts.map((p) => p.file),
        this.now(),
      ),
    );
  }

  private async readJournal(staging: string): Promise<CommitJournal | undefined> {
    const path = join(staging, COMMIT_JOURNAL);
    let text: string;
    try {
      text = await this.fs.readFile(path);
    } catch (error) {
      if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return undefined;
      throw error;
    }
    return parseJournal(text, path);
  }

  private async holdsOutputOf(target: string, jobId: string): Promise<boolean> {
    try {
      return parseManifest(await this.fs.readFile(join(target, OUTPUT_MANIFEST)))?.jobId === jobId;
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return false;
      throw error;
    }
  }

  private async exists(path: string): Promise<boolean> {
    try {
      await this.fs.lstat(path);
      return true;
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return false;
      throw error;
    }
  }

  /** What the target holds; refuses (OutputTargetError) what a text sink may never write. */
  private async contentOf(target: string): Promise<TargetContent> {
    let s: Stats;
    try {
      s = await this.fs.lstat(target);
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        await this.checkAncestors(target);
        return { kind: 'absent' };
      }
      if (code === 'EACCES' || code === 'EPERM')
        throw new OutputTargetError(`cannot look at '${target}': ${code} (permission denied); choose a path this cluster may write`);
      throw error;
    }
    if (s.isFile()) throw new OutputTargetError(fileTargetRefusal(target));
    if (s.isSymbolicLink())
      throw new OutputTargetError(`'${target}' is a symbolic link; a text sink never replaces one: name the folder it points to, or another path`);
    if (!s.isDirectory())
      throw new OutputTargetError(`'${target}' is ${kindOf(s)}, not a folder; a text sink writes a folder of part files: choose another path`);
    const entries = await this.fs.readdir(target);
    if (entries.length === 0) return { kind: 'empty' };
    let manifest;
    if (entries.includes(OUTPUT_MANIFEST)) {
      try {
        manifest = parseManifest(await this.fs.readFile(join(target, OUTPUT_MANIFEST)));
      } catch (error) {
        if (errorCode(error) !== 'EISDIR') throw error;
      }
    }
    return { kind: 'entries', entries, ...(manifest !== undefined ? { manifest } : {}) };
  }

  /** A missing target must be creatable: no ancestor may be a file. */
  private async checkAncestors(target: string): Promise<void> {
    for (let p = dirname(target); ; p = dirname(p)) {
      try {
        const s = await this.fs.stat(p);
        if (s.isDirectory()) return;
        throw new OutputTargetError(
          s.isFile()
            ? `'${p}' is a regular file, so '${target}' cannot become a folder of part files: choose another path`
            : `'${p}' is ${kindOf(s)}, so '${target}' cannot become a folder of part files: choose another path`,
        );
      } catch (error) {
        if (error instanceof OutputTargetError) throw error;
        const code = errorCode(error);
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
      }
      if (dirname(p) === p) return;
    }
  }
}
