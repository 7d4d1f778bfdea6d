// The local InputStore: the contract, and what only a filesystem has — subfolders are not read, and a
// path that is neither a file nor a folder is refused.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InputSourceError } from '../../runtime/core/errors.js';
import { FsInputStore } from '../../runtime/local/fs-input-store.js';
import { describeInputStoreContract, type InputStoreHarness } from '../contracts/input-store.contract.js';

const root = mkdtempSync(join(tmpdir(), 'floe-fs-input-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function harness(): InputStoreHarness {
  const base = join(root, `h${n++}`);
  mkdirSync(base);
  return {
    store: new FsInputStore(),
    newFolder: (name) => join(base, name),
    async putFile(folder, name, bytes) {
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, name), bytes);
    },
  };
}

describeInputStoreContract('FsInputStore', harness);

describe('FsInputStore on the filesystem', () => {
  it("reads a folder's own files, not its subfolders'", async () => {
    const folder = join(root, 'nested');
    mkdirSync(join(folder, 'inner'), { recursive: true });
    writeFileSync(join(folder, 'top.txt'), 'top\n');
    writeFileSync(join(folder, 'inner', 'deep.txt'), 'deep\n');
    expect((await new FsInputStore().listFiles(folder)).map((f) => f.path)).toEqual([join(folder, 'top.txt')]);
  });

  it('refuses a path that is neither a file nor a folder', async () => {
    await expect(new FsInputStore().listFiles('/dev/null')).rejects.toThrow(new InputSourceError("text source: '/dev/null' is neither a file nor a folder"));
  });
});
