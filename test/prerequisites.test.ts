// test/prerequisites.sh, which `npm test` runs first: on a machine where it cannot install what is
// missing, it stops in one line saying what to install.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';

const bin = mkdtempSync(join(tmpdir(), 'floe-prerequisites-'));
afterAll(() => rmSync(bin, { recursive: true, force: true }));

it('without java on the PATH and no apt-get, it fails in one line naming the package and what to do', () => {
  // A PATH holding only what the script itself runs: no java, no apt-get, no sudo.
  for (const tool of ['bash', 'id', 'mktemp', 'tail', 'rm'])
    symlinkSync(spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim(), join(bin, tool));
  const run = spawnSync(join(bin, 'bash'), ['test/prerequisites.sh'], { encoding: 'utf8', env: { PATH: bin, FLOE_CHROMIUM: process.execPath } });
  expect(run.status).toBe(1);
  expect(run.stdout).toBe('');
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(
    /^the tests need openjdk-17-jre-headless \(Java 17 for DynamoDB Local, Chromium for the dashboard tests\), and this machine has no apt-get; install them yourself/,
  );
});

it('with everything present, it installs nothing and says nothing', () => {
  const run = spawnSync('bash', ['test/prerequisites.sh'], { encoding: 'utf8', env: { ...process.env, FLOE_CHROMIUM: process.execPath } });
  expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({ status: 0, stdout: '', stderr: '' });
});
