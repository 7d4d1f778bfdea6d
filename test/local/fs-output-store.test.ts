// The local OutputStore: the contract, and what only a filesystem shows — a reader polling the target
// during a commit, a crash between moving the old output aside and renaming the new one in, symbolic
// links, and staging folders under /proc.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OUTPUT_MANIFEST } from '../../runtime/blob/output-store.js';
import { OutputTargetError } from '../../runtime/core/errors.js';
import { FsOutputStore, localAttemptStagingDir, localStagingDir, makeDirectories, nodeOutputFs, type OutputFs } from '../../runtime/local/fs-output-store.js';
import { describeOutputStoreContract, type OutputStoreHarness } from '../contracts/output-store.contract.js';

const root = mkdtempSync(join(tmpdir(), 'floe-fs-output-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** The real filesystem, except that the `failAt`-th call of `step` matching `when` throws once. */
function faultyFs(step: 'rename', when: (from: string, to: string) => boolean, failAt: number): OutputFs {
  let seen = 0;
  return {
    ...nodeOutputFs,
    [step]: async (from: string, to: string) => {
      if (when(from, to) && ++seen === failAt) throw Object.assign(new Error(`simulated crash at ${step} ${from} -> ${to}`), { code: 'ECRASHED' });
      return nodeOutputFs.rename(from, to);
    },
  };
}

const isPartMove = (_from: string, to: string): boolean => /^part-\d+$/.test(basename(to));

function harness(): OutputStoreHarness {
  const base = join(root, `h${n++}`);
  mkdirSync(base);
  const listDir = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).sort() : []);
  return {
    store: new FsOutputStore(),
    newTarget: (name) => join(base, name),
    async putFile(target, name, text) {
      mkdirSync(target, { recursive: true });
      writeFileSync(join(target, name), text);
    },
    async makeFile(target, text) {
      writeFileSync(target, text);
    },
    readFile: async (target, name) => readFileSync(join(target, name), 'utf8'),
    list: async (target) => listDir(target),
    async overwriteStagedPart(target, jobId, attemptId, subtask, text) {
      writeFileSync(join(localAttemptStagingDir(target, jobId, attemptId), `part-${subtask}`), text);
    },
    stagingLeft: async (target, jobId) => {
      const staging = localStagingDir(target, jobId);
      return existsSync(staging) ? readdirSync(staging, { recursive: true }).map(String).sort() : [];
    },
    storeFailingAtPartMove: (failAt) => new FsOutputStore(faultyFs('rename', isPartMove, failAt)),
  };
}

describeOutputStoreContract('FsOutputStore', harness);

async function stage(store: FsOutputStore, target: string, jobId: string, attemptId: string, subtask: number, text: string): Promise<void> {
  const dir = await store.openAttemptStaging(store.attemptStagingLocation(target, jobId, attemptId));
  writeFileSync(join(dir, `part-${subtask}`), text);
}

describe('FsOutputStore on a local filesystem', () => {
  it('never shows a reader polling the target a partial set of parts while it replaces an earlier output', async () => {
    const store = new FsOutputStore();
    const target = join(root, 'polled');
    const PARTS_OLD = 40;
    const PARTS_NEW = 30;
    for (let i = 0; i < PARTS_OLD; i++) await stage(store, target, 'j-old', `o${i}`, i, `old ${i}\n`);
    await store.commit(
      target,
      'j-old',
      'no-overwrite',
      Array.from({ length: PARTS_OLD }, (_, i) => `o${i}`),
    );
    for (let i = 0; i < PARTS_NEW; i++) await stage(store, target, 'j-new', `a${i}`, i, `new ${i}\n`);

    const oldSet = [OUTPUT_MANIFEST, ...Array.from({ length: PARTS_OLD }, (_, i) => `part-${i}`)].sort();
    const newSet = [OUTPUT_MANIFEST, ...Array.from({ length: PARTS_NEW }, (_, i) => `part-${i}`)].sort();
    const seen = new Map<string, number>();
    let done = false;
    const poll = (async () => {
      while (!done) {
        let view: string;
        try {
          const names = readdirSync(target).sort();
          const sameAs = (set: string[]) => names.length === set.length && names.every((x, i) => x === set[i]);
          // A matching listing must also hold matching contents: read every part while the commit runs.
          const generation = sameAs(newSet) ? 'new' : sameAs(oldSet) ? 'old' : `partial: ${names.length} entries`;
          if (generation === 'new' || generation === 'old') {
            for (const f of names.filter((x) => x !== OUTPUT_MANIFEST)) expect(readFileSync(join(target, f), 'utf8').startsWith(generation)).toBe(true);
          }
          view = generation;
        } catch (error) {
          const code = (error as { code?: string }).code;
          // The folder is absent for a moment between moving the old one aside and renaming the new one in.
          if (code !== 'ENOENT') throw error;
          view = 'absent';
        }
        seen.set(view, (seen.get(view) ?? 0) + 1);
        await new Promise((r) => setImmediate(r));
      }
    })();
    try {
      await store.commit(
        target,
        'j-new',
        'overwrite',
        Array.from({ length: PARTS_NEW }, (_, i) => `a${i}`),
      );
    } finally {
      done = true;
      await poll;
    }
    expect([...seen.keys()].filter((k) => k.startsWith('partial'))).toEqual([]);
    expect(seen.get('old')).toBeGreaterThan(0);
    expect(readdirSync(target).sort()).toEqual(newSet);
  });

  it('completes a commit that stopped after moving the old output aside: the new output appears, the old one goes only then', async () => {
    const target = join(root, 'aside');
    const store = new FsOutputStore();
    await stage(store, target, 'j-old', 'o0', 0, 'old\n');
    await store.commit(target, 'j-old', 'no-overwrite', ['o0']);
    await stage(store, target, 'j-new', 'a0', 0, 'new\n');
    const crashing = new FsOutputStore(faultyFs('rename', (from) => basename(from) === '_committed', 1));
    await expect(crashing.commit(target, 'j-new', 'overwrite', ['a0'])).rejects.toThrow(/simulated crash/);
    // The target is absent; the old output waits aside in the staging area, the new one assembled.
    expect(existsSync(target)).toBe(false);
    const staging = localStagingDir(target, 'j-new');
    expect(readFileSync(join(staging, '_previous-0', 'part-0'), 'utf8')).toBe('old\n');
    expect(await store.commit(target, 'j-new', 'overwrite', ['a0'])).toBe('resumed');
    expect(readdirSync(target).sort()).toEqual([OUTPUT_MANIFEST, 'part-0']);
    expect(readFileSync(join(target, 'part-0'), 'utf8')).toBe('new\n');
    expect(existsSync(staging)).toBe(false);
  });

  it('refuses a symbolic link as a target and leaves it and what it points to', async () => {
    const real = join(root, 'real-folder');
    mkdirSync(real);
    const link = join(root, 'link');
    symlinkSync(real, link);
    const store = new FsOutputStore();
    await expect(store.checkTarget(link, 'overwrite', 'j-link')).rejects.toThrow(/symbolic link/);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
  });

  it('fails at once to make a staging folder under /proc, naming the folder it cannot make', async () => {
    await expect(makeDirectories(nodeOutputFs, '/proc/floe-test/.out.staging-j/a0')).rejects.toThrow(/'\/proc\/floe-test'/);
    const store = new FsOutputStore();
    await expect(store.openAttemptStaging('/proc/floe-test/.out.staging-j/a0')).rejects.toThrow(/ENOENT/);
  });

  it('makes missing parent folders of a new target, one level at a time', async () => {
    const target = join(root, 'deep', 'er', 'out');
    const store = new FsOutputStore();
    await store.checkTarget(target, 'no-overwrite', 'j-deep');
    await stage(store, target, 'j-deep', 'a0', 0, 'x\n');
    await store.commit(target, 'j-deep', 'no-overwrite', ['a0']);
    expect(readFileSync(join(target, 'part-0'), 'utf8')).toBe('x\n');
    expect(readdirSync(dirname(target))).toEqual(['out']);
  });

  it('refuses an unreadable journal instead of guessing what to commit', async () => {
    const target = join(root, 'bad-journal');
    const store = new FsOutputStore();
    await stage(store, target, 'j-bad', 'a0', 0, 'x\n');
    writeFileSync(join(localStagingDir(target, 'j-bad'), '_commit.json'), '{ not json');
    await expect(store.commit(target, 'j-bad', 'no-overwrite', ['a0'])).rejects.toThrow(/commit journal .* unreadable/);
    expect(existsSync(target)).toBe(false);
  });

  it('names the target and the folder of the finished output when a file took the target’s place', async () => {
    const target = join(root, 'became-file');
    const store = new FsOutputStore();
    await stage(store, target, 'j-f', 'a0', 0, 'x\n');
    writeFileSync(target, 'the user wrote a file here meanwhile\n');
    const commit = store.commit(target, 'j-f', 'overwrite', ['a0']);
    await expect(commit).rejects.toBeInstanceOf(OutputTargetError);
    await expect(commit).rejects.toThrow(`'${target}' is a regular file`);
    await expect(commit).rejects.toThrow(`complete in '${join(localStagingDir(target, 'j-f'), '_committed')}'`);
    expect(readFileSync(target, 'utf8')).toBe('the user wrote a file here meanwhile\n');
    expect(readFileSync(join(localStagingDir(target, 'j-f'), '_committed', 'part-0'), 'utf8')).toBe('x\n');
  });
});
