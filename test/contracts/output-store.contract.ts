// The OutputStore contract: what every adapter (local filesystem, S3) promises the Dispatcher, the tasks
// and the JobMaster. No user file is ever deleted or replaced; only the last finished attempt of each
// subtask reaches the target; a commit interrupted halfway is completed by the next call.
import { rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OUTPUT_MANIFEST, OutputPartChangedError, parseManifest, type OutputStore, type StagedPart } from '../../runtime/blob/output-store.js';
import { OutputTargetError } from '../../runtime/core/errors.js';

export interface OutputStoreHarness {
  readonly store: OutputStore;
  /** A fresh target that nothing wrote yet. */
  newTarget(name: string): string;
  /** Writes `name` inside `target` as a user would (a file in the folder, an object under the prefix). */
  putFile(target: string, name: string, text: string): Promise<void>;
  /** Makes the target itself a regular file (an object named like the prefix on S3). */
  makeFile(target: string, text: string): Promise<void>;
  readFile(target: string, name: string): Promise<string>;
  /** What the target holds, relative names sorted, staging areas of jobs left out; [] when absent. */
  list(target: string): Promise<string[]>;
  /** What is left of the job's staging area for `target`. */
  stagingLeft(target: string, jobId: string): Promise<string[]>;
  /** A store over the same backend whose `n`-th move of a part into place (1-based) throws once, as a crash there would stop it. */
  storeFailingAtPartMove(n: number): OutputStore;
  /** Writes `text` over the part an attempt staged, as anything that can write the staging area could. */
  overwriteStagedPart(target: string, jobId: string, attemptId: string, subtask: number, text: string): Promise<void>;
}

/** Stages `text` as subtask `subtask`'s part of `attemptId`, the way a task does; what the task reports. */
async function stage(store: OutputStore, target: string, jobId: string, attemptId: string, subtask: number, text: string): Promise<StagedPart> {
  const location = store.attemptStagingLocation(target, jobId, attemptId);
  const dir = await store.openAttemptStaging(location);
  const file = join(dir, `part-${subtask}`);
  writeFileSync(file, text);
  if (!store.remote) return { size: statSync(file).size };
  const staged = await store.uploadPart(location, subtask, file);
  rmSync(dir, { recursive: true, force: true });
  return staged;
}

const manifestOf = async (h: OutputStoreHarness, target: string) => parseManifest(await h.readFile(target, OUTPUT_MANIFEST));

export function describeOutputStoreContract(name: string, harness: () => OutputStoreHarness): void {
  describe(`OutputStore contract: ${name}`, () => {
    /** Job `jobId` writes one part per text, one attempt each, and commits them. */
    async function runJob(
      h: OutputStoreHarness,
      target: string,
      jobId: string,
      texts: string[],
      writeMode: 'no-overwrite' | 'overwrite' = 'no-overwrite',
    ): Promise<void> {
      await h.store.checkTarget(target, writeMode, jobId);
      for (const [i, t] of texts.entries()) await stage(h.store, target, jobId, `${jobId}-a${i}`, i, t);
      await h.store.commit(
        target,
        jobId,
        writeMode,
        texts.map((_, i) => `${jobId}-a${i}`),
      );
    }

    it('commits into a new target the parts and a manifest listing them, and leaves no staging behind', async () => {
      const h = harness();
      const target = h.newTarget('fresh');
      await h.store.checkTarget(target, 'no-overwrite', 'j-fresh');
      await stage(h.store, target, 'j-fresh', 'a0', 0, 'zero\n');
      await stage(h.store, target, 'j-fresh', 'a1', 1, 'one\n');
      expect(await h.list(target)).toEqual([]);
      expect(await h.store.commit(target, 'j-fresh', 'no-overwrite', ['a0', 'a1'])).toBe('committed');
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'part-1']);
      expect(await h.readFile(target, 'part-0')).toBe('zero\n');
      expect(await h.readFile(target, 'part-1')).toBe('one\n');
      expect(await manifestOf(h, target)).toMatchObject({ committer: 'floe', jobId: 'j-fresh', files: ['part-0', 'part-1'] });
      expect(await h.stagingLeft(target, 'j-fresh')).toEqual([]);
    });

    it('commits only the finished attempt of a subtask that also has a failed one, and deletes the failed one', async () => {
      const h = harness();
      const target = h.newTarget('attempts');
      await stage(h.store, target, 'j-att', 'a0', 0, 'zero\n');
      await stage(h.store, target, 'j-att', 'a1-failed', 1, 'from the failed attempt\n');
      await stage(h.store, target, 'j-att', 'a1-retry', 1, 'one\n');
      await h.store.commit(target, 'j-att', 'no-overwrite', ['a0', 'a1-retry']);
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'part-1']);
      expect(await h.readFile(target, 'part-1')).toBe('one\n');
      expect(await h.stagingLeft(target, 'j-att')).toEqual([]);
    });

    it('discards one attempt, and on discard of the job leaves the target as it was', async () => {
      const h = harness();
      const target = h.newTarget('discard');
      await runJob(h, target, 'j-prev', ['previous\n']);
      await stage(h.store, target, 'j-disc', 'a0-failed', 0, 'failed\n');
      await stage(h.store, target, 'j-disc', 'a0', 0, 'new\n');
      await h.store.discardAttempt(target, 'j-disc', 'a0-failed');
      expect((await h.stagingLeft(target, 'j-disc')).some((k) => k.includes('a0-failed'))).toBe(false);
      expect((await h.stagingLeft(target, 'j-disc')).some((k) => k.includes('a0'))).toBe(true);
      expect(await h.store.discard(target, 'j-disc')).toEqual({});
      expect(await h.stagingLeft(target, 'j-disc')).toEqual([]);
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0']);
      expect(await h.readFile(target, 'part-0')).toBe('previous\n');
    });

    it('refuses in either mode a target holding files Floe did not write, naming them, and leaves them', async () => {
      const h = harness();
      const target = h.newTarget('foreign');
      await h.putFile(target, 'notes.md', 'mine\n');
      await h.putFile(target, 'part-0', 'my own part-0, not a Floe output\n');
      for (const mode of ['no-overwrite', 'overwrite'] as const) {
        const refused = h.store.checkTarget(target, mode, 'j-foreign');
        await expect(refused).rejects.toBeInstanceOf(OutputTargetError);
        await expect(refused).rejects.toThrow(/notes\.md/);
        await expect(refused).rejects.toThrow(`'${target}'`);
      }
      expect(await h.list(target)).toEqual(['notes.md', 'part-0']);
      expect(await h.readFile(target, 'part-0')).toBe('my own part-0, not a Floe output\n');
    });

    it('lets a job resumed from a savepoint write on a folder of rolling part files, and nothing else', async () => {
      const h = harness();
      const target = h.newTarget('rolling');
      await h.putFile(target, 'part-0-0', 'a\n');
      await h.putFile(target, 'part-1-3', 'b\n');
      const resumed = { continuesRollingParts: true } as const;
      await h.store.checkTarget(target, 'no-overwrite', 'j-resumed', resumed);
      // Not resumed: refused as before.
      await expect(h.store.checkTarget(target, 'no-overwrite', 'j-fresh')).rejects.toThrow(/part-0-0/);
      // Anything beside the parts is somebody's: refused, named, left.
      await h.putFile(target, 'notes.md', 'mine\n');
      await expect(h.store.checkTarget(target, 'no-overwrite', 'j-resumed', resumed)).rejects.toThrow(/notes\.md/);
      expect(await h.list(target)).toEqual(['notes.md', 'part-0-0', 'part-1-3']);
    });

    it('refuses in either mode a target whose _SUCCESS another tool wrote, and leaves it', async () => {
      const h = harness();
      const target = h.newTarget('hadoop');
      await h.putFile(target, OUTPUT_MANIFEST, '');
      for (const mode of ['no-overwrite', 'overwrite'] as const)
        await expect(h.store.checkTarget(target, mode, 'j-hadoop')).rejects.toThrow(`'${OUTPUT_MANIFEST}'`);
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST]);
    });

    it('refuses in either mode a target that is a regular file', async () => {
      const h = harness();
      const target = h.newTarget('a-file');
      await h.makeFile(target, 'a,b\n');
      for (const mode of ['no-overwrite', 'overwrite'] as const)
        await expect(h.store.checkTarget(target, mode, 'j-file')).rejects.toBeInstanceOf(OutputTargetError);
    });

    it("accepts an empty target, and its own job's output again (a resubmission); refuses an earlier output without overwrite", async () => {
      const h = harness();
      const target = h.newTarget('own');
      await runJob(h, target, 'j-own', ['x\n']);
      await h.store.checkTarget(target, 'no-overwrite', 'j-own');
      await expect(h.store.checkTarget(target, 'no-overwrite', 'j-other')).rejects.toThrow(/holds the output of Floe job j-own.*'overwrite'/);
      await h.store.checkTarget(target, 'overwrite', 'j-other');
      // Calling commit again is harmless: the output is there.
      expect(await h.store.commit(target, 'j-own', 'no-overwrite', ['j-own-a0'])).toBe('already-committed');
      expect(await h.readFile(target, 'part-0')).toBe('x\n');
    });

    it('overwrite replaces an earlier Floe output and keeps nothing of it', async () => {
      const h = harness();
      const target = h.newTarget('overwrite');
      await runJob(h, target, 'j-old', ['old 0\n', 'old 1\n', 'old 2\n']);
      await runJob(h, target, 'j-new', ['new 0\n', 'new 1\n'], 'overwrite');
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'part-1']);
      expect(await h.readFile(target, 'part-0')).toBe('new 0\n');
      expect(await h.readFile(target, 'part-1')).toBe('new 1\n');
      expect(await manifestOf(h, target)).toMatchObject({ jobId: 'j-new', files: ['part-0', 'part-1'] });
      expect(await h.stagingLeft(target, 'j-new')).toEqual([]);
    });

    it('overwrite refuses an earlier Floe output beside unrelated files; they and the output stay', async () => {
      const h = harness();
      const target = h.newTarget('overwrite-foreign');
      await runJob(h, target, 'j-old', ['old\n']);
      await h.putFile(target, 'report.pdf', '%PDF\n');
      await expect(h.store.checkTarget(target, 'overwrite', 'j-new')).rejects.toThrow(/report\.pdf/);
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'report.pdf']);
      expect(await h.readFile(target, 'part-0')).toBe('old\n');
    });

    it('re-checks the target at commit: one that changed since submission fails the commit, naming it and where the staged output stays', async () => {
      const h = harness();
      const target = h.newTarget('changed');
      await h.store.checkTarget(target, 'no-overwrite', 'j-late');
      await stage(h.store, target, 'j-late', 'a0', 0, 'mine\n');
      await h.putFile(target, 'arrived-meanwhile.txt', 'a user file\n');
      const commit = h.store.commit(target, 'j-late', 'no-overwrite', ['a0']);
      await expect(commit).rejects.toBeInstanceOf(OutputTargetError);
      await expect(commit).rejects.toThrow(/arrived-meanwhile\.txt.*not deleted/);
      expect(await h.list(target)).toEqual(['arrived-meanwhile.txt']);
      expect(await h.readFile(target, 'arrived-meanwhile.txt')).toBe('a user file\n');
      // Discarding the failed job keeps the output whose commit began, and says where.
      const { kept } = await h.store.discard(target, 'j-late');
      expect(kept).toBeDefined();
      expect((await h.stagingLeft(target, 'j-late')).length).toBeGreaterThan(0);
    });

    it("completes a commit interrupted after some parts moved when the next committer calls it, with the journal's attempts", async () => {
      const h = harness();
      const target = h.newTarget('interrupted');
      await runJob(h, target, 'j-old', ['old 0\n', 'old 1\n', 'old 2\n', 'old 3\n']);
      const texts = ['new 0\n', 'new 1\n', 'new 2\n'];
      for (const [i, t] of texts.entries()) await stage(h.store, target, 'j-int', `a${i}`, i, t);
      await stage(h.store, target, 'j-int', 'a1-later', 1, 'a later attempt the journal does not name\n');
      await expect(h.storeFailingAtPartMove(2).commit(target, 'j-int', 'overwrite', ['a0', 'a1', 'a2'])).rejects.toThrow();
      // The next JobMaster of the job commits again (here naming another attempt: the journal decides).
      expect(await h.store.commit(target, 'j-int', 'overwrite', ['a0', 'a1-later', 'a2'])).toBe('resumed');
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'part-1', 'part-2']);
      for (const [i, t] of texts.entries()) expect(await h.readFile(target, `part-${i}`)).toBe(t);
      expect(await manifestOf(h, target)).toMatchObject({ jobId: 'j-int', files: ['part-0', 'part-1', 'part-2'] });
      expect(await h.stagingLeft(target, 'j-int')).toEqual([]);
    });

    it('refuses to discard an attempt a begun commit names', async () => {
      const h = harness();
      const target = h.newTarget('committing-attempt');
      await stage(h.store, target, 'j-c', 'a0', 0, 'zero\n');
      await stage(h.store, target, 'j-c', 'b0', 1, 'one\n');
      await expect(h.storeFailingAtPartMove(2).commit(target, 'j-c', 'no-overwrite', ['a0', 'b0'])).rejects.toThrow();
      await expect(h.store.discardAttempt(target, 'j-c', 'b0')).rejects.toThrow(/part of the commit/);
      expect(await h.store.commit(target, 'j-c', 'no-overwrite', ['a0', 'b0'])).toBe('resumed');
      expect(await h.readFile(target, 'part-1')).toBe('one\n');
    });

    it('refuses a part written over after its task reported it: a named error, not retryable, and nothing of the output published', async () => {
      const h = harness();
      const target = h.newTarget('changed');
      const staged = [await stage(h.store, target, 'j-chg', 'a0', 0, 'zero\n'), await stage(h.store, target, 'j-chg', 'a1', 1, 'one\n')];
      await h.overwriteStagedPart(target, 'j-chg', 'a1', 1, 'one, and what another writer put here\n');
      const refused = await h.store.commit(target, 'j-chg', 'no-overwrite', ['a0', 'a1'], staged).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(OutputPartChangedError);
      expect(refused).toMatchObject({ code: 'OUTPUT_PART_CHANGED', retryable: false });
      expect((refused as Error).message).toMatch(/subtask 1 \(attempt a1\).*changed after its task finished.*Nothing of this job's output is published/);
      expect(await h.list(target)).toEqual([]);
      // The next JobMaster of the job, resuming from the journal, refuses it too.
      await expect(h.store.commit(target, 'j-chg', 'no-overwrite', ['a0', 'a1'], staged)).rejects.toThrow(OutputPartChangedError);
      await expect(h.store.commit(target, 'j-chg', 'no-overwrite', ['a0', 'a1'])).rejects.toThrow(OutputPartChangedError);
      expect(await h.list(target)).toEqual([]);
    });

    it('commits parts that are what their tasks reported', async () => {
      const h = harness();
      const target = h.newTarget('unchanged');
      const staged = [await stage(h.store, target, 'j-same', 'a0', 0, 'zero\n'), await stage(h.store, target, 'j-same', 'a1', 1, '')];
      expect(await h.store.commit(target, 'j-same', 'no-overwrite', ['a0', 'a1'], staged)).toBe('committed');
      expect(await h.readFile(target, 'part-0')).toBe('zero\n');
      expect(await h.list(target)).toEqual([OUTPUT_MANIFEST, 'part-0', 'part-1']);
    });

    it('refuses a commit whose finished attempt staged nothing, naming the subtask', async () => {
      const h = harness();
      const target = h.newTarget('missing');
      await stage(h.store, target, 'j-miss', 'a0', 0, 'zero\n');
      await expect(h.store.commit(target, 'j-miss', 'no-overwrite', ['a0', 'a1'])).rejects.toThrow(/subtask 1 \(attempt a1\)/);
      expect(await h.list(target)).toEqual([]);
    });

    describe('rolling part files (streaming sinks)', () => {
      /** What a reader listing the target sees: hidden names (in-progress parts) left out. */
      const visible = async (h: OutputStoreHarness, target: string): Promise<string[]> => (await h.list(target)).filter((n) => !n.startsWith('.'));

      it('shows a part only once it rolls, whole, as part-<subtask>-<n>, numbered in order', async () => {
        const h = harness();
        const target = h.newTarget('rolling');
        const parts = await h.store.openRollingParts(target, 1, 'r-a0');
        const first = await parts.openPart();
        await first.write('a\n');
        await first.write('b\n');
        expect(first.size).toBe(4);
        expect(await visible(h, target)).toEqual([]);
        expect(await first.commit()).toBe('part-1-0');
        expect(await visible(h, target)).toEqual(['part-1-0']);
        expect(await h.readFile(target, 'part-1-0')).toBe('a\nb\n');
        const second = await parts.openPart();
        await second.write('c\n');
        expect(await second.commit()).toBe('part-1-1');
        expect(await h.readFile(target, 'part-1-1')).toBe('c\n');
      });

      it('numbers a new attempt after the parts the target holds and never replaces what is there', async () => {
        const h = harness();
        const target = h.newTarget('rolling-next');
        await h.putFile(target, 'part-0-4', 'earlier\n');
        await h.putFile(target, 'part-1-9', 'other subtask\n');
        const part = await (await h.store.openRollingParts(target, 0, 'r-a1')).openPart();
        await part.write('new\n');
        expect(await part.commit()).toBe('part-0-5');
        expect(await h.readFile(target, 'part-0-4')).toBe('earlier\n');
        expect(await h.readFile(target, 'part-1-9')).toBe('other subtask\n');
      });

      it('keeps a file written under a part name while that part was in progress', async () => {
        const h = harness();
        const target = h.newTarget('rolling-race');
        const part = await (await h.store.openRollingParts(target, 0, 'r-a2')).openPart();
        await part.write('mine\n');
        await h.putFile(target, 'part-0-0', 'user\n');
        // The part takes another name, or the roll fails saying why: either way the user's file stays.
        const name = await part.commit().catch((e: unknown) => (e as Error).message);
        expect(name).toMatch(/^part-0-1$|never replaces/);
        expect(await h.readFile(target, 'part-0-0')).toBe('user\n');
      });

      it('leaves an abandoned part invisible', async () => {
        const h = harness();
        const target = h.newTarget('rolling-abandoned');
        const part = await (await h.store.openRollingParts(target, 0, 'r-a3')).openPart();
        await part.write('half a li');
        await part.abandon();
        expect(await visible(h, target)).toEqual([]);
      });

      it('keeps a part closed at a checkpoint hidden until it is committed; committing it again (after a failure) changes nothing', async () => {
        const h = harness();
        const target = h.newTarget('rolling-pending');
        const part = await (await h.store.openRollingParts(target, 0, 'r-p0')).openPart();
        await part.write('a\n');
        await part.write('b\n');
        const pending = await part.closeForCommit();
        expect(pending).toMatchObject({ name: 'part-0-0', size: 4 });
        expect(await visible(h, target)).toEqual([]);
        // A new attempt commits it from the restored state, through its own parts.
        const again = await h.store.openRollingParts(target, 0, 'r-p1');
        await again.commitPending(pending);
        expect(await visible(h, target)).toEqual(['part-0-0']);
        expect(await h.readFile(target, 'part-0-0')).toBe('a\nb\n');
        await again.commitPending(pending);
        expect(await visible(h, target)).toEqual(['part-0-0']);
        expect(await h.readFile(target, 'part-0-0')).toBe('a\nb\n');
        // Numbers go on after it.
        const next = await (await h.store.openRollingParts(target, 0, 'r-p2')).openPart();
        await next.write('c\n');
        expect((await next.closeForCommit()).name).toBe('part-0-1');
      });

      it('opened again by an attempt from the number after its pending part, names the next part after it; both commit', async () => {
        const h = harness();
        const target = h.newTarget('rolling-reopened');
        const first = await (await h.store.openRollingParts(target, 0, 'r-o0')).openPart();
        expect(first.name).toBe('part-0-0');
        await first.write('a\n');
        const pending = await first.closeForCommit();
        const again = await h.store.openRollingParts(target, 0, 'r-o0', 1);
        const second = await again.openPart();
        expect(second.name).toBe('part-0-1');
        await second.write('b\n');
        const next = await second.closeForCommit();
        await again.commitPending(pending);
        await again.commitPending(next);
        expect(await visible(h, target)).toEqual(['part-0-0', 'part-0-1']);
        expect(await h.readFile(target, 'part-0-1')).toBe('b\n');
      });

      it('never replaces a file written under a pending part name: the commit fails saying so', async () => {
        const h = harness();
        const target = h.newTarget('rolling-pending-taken');
        const parts = await h.store.openRollingParts(target, 0, 'r-q0');
        const part = await parts.openPart();
        await part.write('mine\n');
        const pending = await part.closeForCommit();
        await h.putFile(target, pending.name, 'user\n');
        await expect(parts.commitPending(pending)).rejects.toThrow(/never replaces/);
        expect(await h.readFile(target, pending.name)).toBe('user\n');
      });

      it('rolls a part larger than one upload part whole', async () => {
        const h = harness();
        const target = h.newTarget('rolling-large');
        const part = await (await h.store.openRollingParts(target, 0, 'r-a4')).openPart();
        const line = 'x'.repeat(1023) + '\n';
        const chunk = line.repeat(512);
        for (let i = 0; i < 12; i++) await part.write(chunk);
        expect(await part.commit()).toBe('part-0-0');
        const text = await h.readFile(target, 'part-0-0');
        expect(text.length).toBe(12 * chunk.length);
        expect(
          text
            .split('\n')
            .slice(0, -1)
            .every((l) => l === 'x'.repeat(1023)),
        ).toBe(true);
      });
    });
  });
}
