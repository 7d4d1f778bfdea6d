// Checkpoint storage on local files (file://): the CheckpointStorage contract, and local paths taken as
// file:// URIs.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointStorageFor } from '../../runtime/checkpoint/file-system-checkpoint-storage.js';
import type { CompletedCheckpoint } from '../../runtime/ha/completed-checkpoint-store.js';
import { deleteUnreferenced } from '../../runtime/jobmaster/checkpoints-cleaner.js';
import { describeCheckpointStorageContract } from '../contracts/checkpoint-storage.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-checkpoints-'));
let n = 0;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every file below `path`, hidden ones included (a temporary file left behind would show). */
function filesBelow(path: string): string[] {
  try {
    return readdirSync(path, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => `file://${join(e.parentPath, e.name)}`)
      .sort();
  } catch {
    return [];
  }
}

describeCheckpointStorageContract('local files', {
  newRoot: () => `file://${join(dir, `root-${n++}`)}`,
  files: (root) => Promise.resolve(filesBelow(root.slice('file://'.length))),
});

describe('checkpoint storage on a local path', () => {
  it('takes a plain absolute path as the file:// URI of the same folder', async () => {
    const root = join(dir, 'plain');
    const storage = checkpointStorageFor(`${root}/`, 'job-1');
    const handle = await storage.write(1, 'state', new Uint8Array([1, 2, 3]));
    expect(handle.uri).toBe(`file://${root}/job-1/chk-1/state`);
    expect(filesBelow(root)).toEqual([handle.uri]);
    expect([...(await storage.read({ uri: `${root}/job-1/chk-1/state`, size: 3 }))]).toEqual([1, 2, 3]);
  });

  it('never shows a reader part of a file while it is written again, nor leaves a partial file when a write fails', async () => {
    const root = join(dir, 'atomic');
    const storage = checkpointStorageFor(root, 'job-1');
    const size = 4 * 1024 * 1024;
    const versions = [new Uint8Array(size).fill(1), new Uint8Array(size).fill(2)];
    const handle = await storage.write(1, 'state', versions[0]!);
    let writing = true;
    const writes = (async () => {
      for (let i = 1; i <= 12; i++) await storage.write(1, 'state', versions[i % 2]!);
      writing = false;
    })();
    let reads = 0;
    while (writing || reads === 0) {
      const got = await storage.read(handle);
      expect(got.length).toBe(size);
      expect(got.every((b) => b === got[0])).toBe(true);
      reads++;
    }
    await writes;
    // A write whose rename into place fails (a folder is in the way) leaves no temporary file behind.
    mkdirSync(join(root, 'job-1', 'chk-2', 'blocked'), { recursive: true });
    writeFileSync(join(root, 'job-1', 'chk-2', 'blocked', 'x'), 'x');
    await expect(storage.write(2, 'blocked', versions[0]!)).rejects.toThrow();
    expect(filesBelow(join(root, 'job-1', 'chk-2'))).toEqual([`file://${join(root, 'job-1', 'chk-2', 'blocked', 'x')}`]);
  });
});

const completed = (checkpointId: number, metadataPointer: string, sharedState: CompletedCheckpoint['sharedState']): CompletedCheckpoint => ({
  jobId: 'job-1' as CompletedCheckpoint['jobId'],
  checkpointId,
  timestampMs: 0,
  completedAtMs: 0,
  metadataPointer,
  sharedState,
  stateSize: 1,
});

describe("the end of a job's checkpoint files", () => {
  it('deletes the temporary file of a write whose writer was killed, with the files no kept checkpoint references', async () => {
    const root = join(dir, 'killed-writer');
    const storage = checkpointStorageFor(root, 'job-1');
    const kept = await storage.write(1, 'state-1', new Uint8Array([1]), { shared: true });
    const metadata = await storage.writeMetadata(1, new TextEncoder().encode(JSON.stringify({ subtasks: [] })));
    const dropped = await storage.write(2, 'state-2', new Uint8Array([2]), { shared: true });
    // What a write leaves when its process dies between its first byte and its rename.
    const left = join(root, 'job-1', 'shared', '.0123456789ab.inprogress');
    writeFileSync(left, 'half a file');
    expect(await storage.listFiles()).toContain(`file://${left}`);
    const deleted = await deleteUnreferenced(storage, [{ checkpoint: completed(1, metadata, [kept]), files: { own: [], shared: [kept] } }]);
    expect(deleted).toEqual([dropped.uri, `file://${left}`].sort());
    expect(filesBelow(root)).toEqual([metadata, kept.uri].sort());
  });
});
