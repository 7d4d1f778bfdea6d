// A local cluster's secret belongs to its state dir (runtime/local/state-dir-secret.ts), so workers that
// outlive a Dispatcher and the Dispatcher started after it accept each other's calls.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stateDirSecret, stateDirSecretPath } from '../../runtime/local/state-dir-secret.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const stateDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'floe-secret-'));
  dirs.push(d);
  return d;
};

describe('the state dir secret', () => {
  it('is made once, readable by its owner only, and the same for every later Dispatcher of the state dir', () => {
    const dir = stateDir();
    const first = stateDirSecret(dir);
    expect(first).toMatch(/^[0-9a-f]{48}$/);
    expect(statSync(stateDirSecretPath(dir)).mode & 0o777).toBe(0o600);
    expect(stateDirSecret(dir)).toBe(first);
    expect(stateDirSecret(stateDir())).not.toBe(first);
  });

  it('is made anew once the file was deleted', () => {
    const dir = stateDir();
    const first = stateDirSecret(dir);
    rmSync(stateDirSecretPath(dir));
    expect(stateDirSecret(dir)).not.toBe(first);
  });

  it('refuses a file that holds something else, and leaves it as it is', () => {
    const dir = stateDir();
    writeFileSync(stateDirSecretPath(dir), 'my notes\n');
    expect(() => stateDirSecret(dir)).toThrow(/does not hold a cluster secret .* left as it is/);
    expect(readFileSync(stateDirSecretPath(dir), 'utf8')).toBe('my notes\n');
  });
});
