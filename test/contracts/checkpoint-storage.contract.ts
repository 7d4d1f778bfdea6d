// The CheckpointStorage contract: what checkpoint storage on every file system (local files, S3) promises
// the tasks that write state and the JobMaster that completes, restores and deletes checkpoints. Files go
// where the layout says (`<dir>/<job>/chk-<n>/`, `<dir>/<job>/shared/`, metadata `_metadata`), are read back
// whole or by range, and deleting removes exactly what it names: a checkpoint's own files, or shared files.
import { describe, expect, it } from 'vitest';
import { StateFileNotFoundError } from '../../runtime/blob/state-files.js';
import { openStateParts, writeStateParts } from '../../runtime/checkpoint/checkpoint-storage.js';
import { checkpointStorageFor, FileSystemCheckpointStorage } from '../../runtime/checkpoint/file-system-checkpoint-storage.js';

export interface CheckpointStorageHarness {
  /** A fresh root (URI) nothing wrote under; a checkpoints dir is made below it. */
  newRoot(): string;
  /** Every file under `root`, as URIs, sorted; [] when there is none. */
  files(root: string): Promise<string[]>;
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

export function describeCheckpointStorageContract(name: string, harness: CheckpointStorageHarness): void {
  describe(`CheckpointStorage contract (${name})`, () => {
    it("writes a checkpoint's state files in its folder and shared ones in the job's shared folder, read back whole or by range", async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      const own = await storage.write(1, 'op-1-0-keyed', bytes('0123456789'));
      const shared = await storage.write(1, 'sst-7', bytes('shared bytes'), { shared: true });
      expect(own).toEqual({ uri: `${root}/checkpoints/job-1/chk-1/op-1-0-keyed`, size: 10 });
      expect(shared).toEqual({ uri: `${root}/checkpoints/job-1/shared/sst-7`, size: 12 });
      expect(text(await storage.read(own))).toBe('0123456789');
      expect(text(await storage.read(own, { offset: 3, length: 4 }))).toBe('3456');
      expect(text(await storage.read(shared, { offset: 0, length: 6 }))).toBe('shared');
      expect(await storage.read(own, { offset: 5, length: 0 })).toHaveLength(0);
      // Another job's storage reads the handles too (a restore from a savepoint or another job's checkpoint).
      expect(text(await checkpointStorageFor(`${root}/checkpoints`, 'job-2').read(own))).toBe('0123456789');
      expect(await harness.files(root)).toEqual([own.uri, shared.uri]);
    });

    it('writes a file given in parts as their bytes in order, whole or by range, none of them, or one', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      const parts = ['key group 0;', '', 'key group 2 is longer;', 'x'.repeat(70_000)].map(bytes);
      const handle = await writeStateParts(storage, 1, 'delta', parts, { shared: true });
      expect(handle).toEqual({ uri: `${root}/checkpoints/job-1/shared/delta`, size: 12 + 22 + 70_000 });
      expect(text(await storage.read(handle))).toBe(`key group 0;key group 2 is longer;${'x'.repeat(70_000)}`);
      expect(text(await storage.read(handle, { offset: 11, length: 14 }))).toBe(';key group 2 i');
      const empty = await writeStateParts(storage, 1, 'nothing', []);
      expect(empty.size).toBe(0);
      expect(await storage.read(empty)).toHaveLength(0);
      expect(text(await storage.read(await writeStateParts(storage, 1, 'one', [bytes('only')])))).toBe('only');
      expect(await harness.files(root)).toEqual([empty.uri, `${root}/checkpoints/job-1/chk-1/one`, handle.uri].sort());
    });

    it('writes a file piece by piece: not there before its close, its pieces in order after; an aborted one leaves nothing', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      const writer = await openStateParts(storage, 3, 'materialization', { shared: true });
      const pieces = ['x'.repeat(70_000), '', 'key group 2;', 'y'.repeat(300_000)];
      for (const piece of pieces) await writer.append(bytes(piece));
      const uri = `${root}/checkpoints/job-1/shared/materialization`;
      await expect(storage.read({ uri, size: 0 })).rejects.toBeInstanceOf(StateFileNotFoundError);
      const handle = await writer.close();
      expect(handle).toEqual({ uri, size: 370_012 });
      expect(text(await storage.read(handle))).toBe(pieces.join(''));
      expect(text(await storage.read(handle, { offset: 69_998, length: 14 }))).toBe('xxkey group 2;');
      const aborted = await openStateParts(storage, 3, 'abandoned', { shared: true });
      await aborted.append(bytes('never whole'));
      await aborted.abort();
      expect(await harness.files(root)).toEqual([uri]);
    });

    it('replaces a file written again whole, and leaves no temporary file behind', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      await storage.write(2, 'state', bytes('first attempt, longer'));
      const again = await storage.write(2, 'state', bytes('second'));
      expect(text(await storage.read(again))).toBe('second');
      expect(await harness.files(root)).toEqual([again.uri]);
    });

    it('writes metadata as the pointer the HA store records; reads it by the pointer or by the checkpoint folder', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      const pointer = await storage.writeMetadata(3, bytes('{"checkpointId":3}'));
      expect(pointer).toBe(`${root}/checkpoints/job-1/chk-3/_metadata`);
      expect(text(await storage.readMetadata(pointer))).toBe('{"checkpointId":3}');
      expect(text(await storage.readMetadata(`${root}/checkpoints/job-1/chk-3/`))).toBe('{"checkpointId":3}');
      const missing = `${root}/checkpoints/job-1/chk-4/_metadata`;
      await expect(storage.readMetadata(missing)).rejects.toThrow(StateFileNotFoundError);
      await expect(storage.readMetadata(missing)).rejects.toThrow(`checkpoint file '${missing}' does not exist`);
    });

    it("discards a checkpoint's own folder only: other checkpoints and shared files stay", async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      await storage.write(1, 'a', bytes('a1'));
      await storage.writeMetadata(1, bytes('m1'));
      const keep = await storage.write(2, 'a', bytes('a2'));
      const keepPointer = await storage.writeMetadata(2, bytes('m2'));
      const shared = await storage.write(1, 'sst-1', bytes('s'), { shared: true });
      await storage.discardCheckpoint(1);
      expect(await harness.files(root)).toEqual([keep.uri, keepPointer, shared.uri].sort());
      // Discarding again, or a checkpoint that never wrote anything, is no error.
      await storage.discardCheckpoint(1);
      await storage.discardCheckpoint(9);
      expect(await harness.files(root)).toHaveLength(3);
    });

    it('deletes the shared files it is given, and refuses any file outside the job’s shared folder before deleting anything', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints`, 'job-1');
      const a = await storage.write(1, 'sst-a', bytes('a'), { shared: true });
      const b = await storage.write(1, 'sst-b', bytes('b'), { shared: true });
      const own = await storage.write(1, 'state', bytes('s'));
      const otherJob = await checkpointStorageFor(`${root}/checkpoints`, 'job-2').write(1, 'sst-a', bytes('x'), { shared: true });
      await expect(storage.deleteShared([a, otherJob])).rejects.toThrow(
        /refusing to delete 1 file\(s\) that are not the shared files of .*job-1.*job-2\/shared\/sst-a/,
      );
      await expect(storage.deleteShared([own])).rejects.toThrow(/refusing to delete/);
      expect(await harness.files(root)).toEqual([a.uri, b.uri, own.uri, otherJob.uri].sort());
      // What later checkpoints may build on: this job's shared files only.
      expect([a, own, otherJob].map((h) => storage.isOwnSharedFile(h.uri))).toEqual([true, false, false]);
      await storage.deleteShared([a]);
      await storage.deleteShared([a]);
      expect(await harness.files(root)).toEqual([b.uri, own.uri, otherJob.uri].sort());
    });

    it('refuses a file name that is not one path segment', async () => {
      const storage = checkpointStorageFor(`${harness.newRoot()}/checkpoints`, 'job-1');
      for (const bad of ['', '..', 'a/b', '_metadata']) await expect(storage.write(1, bad, bytes('x'))).rejects.toThrow(/needs a name of 1-200 characters/);
    });

    it('with an entropy key: state files under random characters in place of the marker, metadata under none, all deleted by discard and deleteShared', async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/_entropy_/checkpoints`, 'job-1', { entropyKey: '_entropy_', entropyLength: 6 });
      const written = await Promise.all(Array.from({ length: 8 }, (_, i) => storage.write(1, `state-${i}`, bytes(`s${i}`))));
      const shared = await storage.write(1, 'sst', bytes('shared'), { shared: true });
      const entropyOf = (uri: string): string => {
        const m = new RegExp(`^${root}/([a-z0-9]{6})/checkpoints/job-1/(chk-1|shared)/[^/]+$`).exec(uri);
        expect(m, uri).not.toBeNull();
        return m![1]!;
      };
      const entropies = new Set([...written, shared].map((h) => entropyOf(h.uri)));
      // Eight files under one repeated 6-character value would be a broken random source.
      expect(entropies.size).toBeGreaterThan(1);
      expect(text(await storage.read(written[3]!))).toBe('s3');
      const pointer = await storage.writeMetadata(1, bytes('m'));
      expect(pointer).toBe(`${root}/checkpoints/job-1/chk-1/_metadata`);
      expect(text(await new FileSystemCheckpointStorage(`${root}/_entropy_/checkpoints/job-1`, { entropyKey: '_entropy_' }).readMetadata(pointer))).toBe('m');
      await expect(storage.discardCheckpoint(1, [shared])).rejects.toThrow(/refusing to delete 1 file\(s\) that are not checkpoint 1's own files/);
      await storage.discardCheckpoint(1, written);
      expect(await harness.files(root)).toEqual([shared.uri]);
      expect(storage.isOwnSharedFile(shared.uri)).toBe(true);
      await storage.deleteShared([shared]);
      expect(await harness.files(root)).toEqual([]);
    });

    it("lists every file of the job's checkpoints, under entropy-injected keys too, and deletes those it is given, refusing any other", async () => {
      const root = harness.newRoot();
      const storage = checkpointStorageFor(`${root}/checkpoints/_entropy_`, 'job-1', { entropyKey: '_entropy_', entropyLength: 4 });
      const other = checkpointStorageFor(`${root}/checkpoints/_entropy_`, 'job-2', { entropyKey: '_entropy_', entropyLength: 4 });
      const own = await storage.write(1, 'op', bytes('1'));
      const shared = await storage.write(1, 'sst', bytes('s'), { shared: true });
      const later = await storage.write(2, 'op', bytes('2'));
      const metadata = await storage.writeMetadata(1, bytes('m'));
      const foreign = await other.write(1, 'op', bytes('x'));
      expect(await storage.listFiles()).toEqual([own.uri, shared.uri, later.uri, metadata].sort());
      await expect(storage.deleteFiles([own.uri, foreign.uri])).rejects.toThrow(/refusing to delete 1 file\(s\) that are not files of this job's checkpoints/);
      await storage.deleteFiles([own.uri, shared.uri, metadata]);
      expect(await storage.listFiles()).toEqual([later.uri]);
      await storage.deleteFiles([later.uri]);
      expect(await harness.files(root)).toEqual([foreign.uri]);
    });
  });
}
