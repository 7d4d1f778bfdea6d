// The InputStore contract: what every adapter (local filesystem, S3) promises the JobMaster, which lists a
// source path and cuts splits, and the tasks, which read each split's lines. Whatever the split size, every
// line of every file is read exactly once, in order; gzip files are read whole, decompressed.
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { InputStore } from '../../runtime/blob/input-store.js';
import { InputSourceError } from '../../runtime/core/errors.js';
import { createSplits } from '../../runtime/jobmaster/input-splits.js';
import { readSplitLines } from '../../runtime/task/text-file-reader.js';

export interface InputStoreHarness {
  readonly store: InputStore;
  /** A fresh folder (prefix) path that holds nothing yet. */
  newFolder(name: string): string;
  /** Writes `bytes` as the file `name` in `folder` (an object `<prefix>/<name>` on S3). */
  putFile(folder: string, name: string, bytes: string | Uint8Array): Promise<void>;
}

/** Every line of `path` (a file or folder), read split by split as the tasks read them. */
export async function readAllLines(store: InputStore, path: string, splitSizeBytes: number, chunkSizeBytes = 64 * 1024): Promise<string[]> {
  const lines: string[] = [];
  for (const split of createSplits(await store.listFiles(path), splitSizeBytes)) {
    for await (const line of readSplitLines(split, { store, chunkSizeBytes })) lines.push(line);
  }
  return lines;
}

export function describeInputStoreContract(name: string, harness: () => InputStoreHarness): void {
  describe(`InputStore contract: ${name}`, () => {
    // Lines of varied length, empty ones, multi-byte characters.
    const lines = Array.from({ length: 60 }, (_, i) => (i % 17 === 0 ? '' : `${i}:${'é'.repeat(i % 5)}${'x'.repeat((i * 7) % 23)}`));
    const cases: [string, string][] = [
      ['\\n', lines.join('\n') + '\n'],
      ['\\r\\n', lines.join('\r\n') + '\r\n'],
      ['no final newline', lines.join('\n')],
      ['mixed endings', lines.map((l, i) => l + (i % 2 ? '\r\n' : '\n')).join('')],
    ];

    it('reads every line exactly once across split sizes, whatever the line endings', async () => {
      const h = harness();
      for (const [caseName, text] of cases) {
        const folder = h.newFolder(`endings-${caseName.replace(/\W/g, '_')}`);
        await h.putFile(folder, 'lines.txt', text);
        const size = Buffer.byteLength(text);
        // Splits shorter than most lines, about as long, and longer than the file; chunks of a few bytes
        // and of many lines. (test/taskexecutor/operators.test.ts sweeps more sizes on local files.)
        for (const [splitSize, chunk] of [
          [13, 5],
          [61, 64 * 1024],
          [size + 10, 5],
        ] as const) {
          expect(await readAllLines(h.store, `${folder}/lines.txt`, splitSize, chunk), `${caseName}: split ${splitSize}, chunk ${chunk}`).toEqual(lines);
        }
      }
    });

    it('reads a line longer than any chunk whole, and only in the split it starts in', async () => {
      const h = harness();
      const folder = h.newFolder('long');
      const long = 'L'.repeat(200_000);
      await h.putFile(folder, 'long.txt', `a\n${long}\nb`);
      expect(await readAllLines(h.store, `${folder}/long.txt`, 50_000, 4096)).toEqual(['a', long, 'b']);
    });

    it("lists a folder's files in name order, leaving out hidden and '_' names; an empty file gives no split", async () => {
      const h = harness();
      const folder = h.newFolder('listing');
      await h.putFile(folder, 'b.txt', 'b1\nb2\n');
      await h.putFile(folder, 'a.txt', 'a1\na2');
      await h.putFile(folder, 'empty.txt', '');
      await h.putFile(folder, '_SUCCESS', '{"committer":"floe"}');
      await h.putFile(folder, '.hidden', 'secret\n');
      const before = Date.now();
      const files = await h.store.listFiles(folder);
      expect(files.map(({ path, size }) => ({ path, size }))).toEqual([
        { path: `${folder}/a.txt`, size: 5 },
        { path: `${folder}/b.txt`, size: 6 },
        { path: `${folder}/empty.txt`, size: 0 },
      ]);
      // Each file's time, by which a continuous source tells new files: about now (S3 keeps whole seconds).
      for (const f of files) expect(Math.abs(f.modifiedMs! - before), f.path).toBeLessThan(60_000);
      expect(createSplits(files, 4).map((s) => [s.path.slice(folder.length + 1), s.start, s.length])).toEqual([
        ['a.txt', 0, 4],
        ['a.txt', 4, 1],
        ['b.txt', 0, 4],
        ['b.txt', 4, 2],
      ]);
      expect(await readAllLines(h.store, folder, 3)).toEqual(['a1', 'a2', 'b1', 'b2']);
    });

    it('reads a gzip file whole as one split, decompressed, and a file of several gzip members as one text', async () => {
      const h = harness();
      const folder = h.newFolder('gzip');
      const text = Array.from({ length: 5_000 }, (_, i) => `line ${i} ${'z'.repeat(i % 13)}`).join('\r\n');
      await h.putFile(folder, 'big.txt.gz', gzipSync(text));
      await h.putFile(folder, 'members.gz', Buffer.concat([gzipSync('one\ntw'), gzipSync('o\nthree\n')]));
      const files = await h.store.listFiles(folder);
      const splits = createSplits(files, 100);
      expect(splits.map((s) => ({ start: s.start, length: s.length, compression: s.compression }))).toEqual(
        files.map((f) => ({ start: 0, length: f.size, compression: 'gzip' })),
      );
      expect(await readAllLines(h.store, `${folder}/big.txt.gz`, 100, 1024)).toEqual(text.split('\r\n'));
      expect(await readAllLines(h.store, `${folder}/members.gz`, 100)).toEqual(['one', 'two', 'three']);
    });

    it('fails on corrupt gzip data naming the file and the split', async () => {
      const h = harness();
      const folder = h.newFolder('bad-gzip');
      await h.putFile(folder, 'broken.gz', 'this is not gzip\n');
      await expect(readAllLines(h.store, `${folder}/broken.gz`, 100)).rejects.toThrow(
        new RegExp(`text source cannot read split 0 of '${folder}/broken\\.gz' \\(gzip, 17 bytes\\): incorrect header check`),
      );
    });

    it('refuses a path that does not exist with an InputSourceError naming it', async () => {
      const h = harness();
      const missing = `${h.newFolder('missing')}/nothing-here.txt`;
      const error = await h.store.listFiles(missing).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InputSourceError);
      expect((error as Error).message).toContain(`'${missing}'`);
    });
  });
}
