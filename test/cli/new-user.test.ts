// A new user's first hour, as README's "Install" tells it: install floe once (npm install -g of the
// checkout, here into a temporary prefix, offline), then in a folder outside the repository: floe init,
// floe check, floe run of the starter job; a type error that stops the run before anything is
// submitted; a job that throws, whose stack names the user's file and line.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../runtime/core/paths.js';
import { STARTER_INPUT } from '../../runtime/cli/init.js';
import { killLeftovers, processesOfCluster } from '../support/cluster-processes.js';

const root = mkdtempSync(join(tmpdir(), 'floe-new-user-'));
const prefix = join(root, 'prefix');
const work = join(root, 'my-first-job');
const state = join(root, 'state');
const floe = join(prefix, 'bin', 'floe');

// The user's shell: nothing of this test run's npm or Floe settings.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|FLOE_|VITEST|NODE_OPTIONS$)/i.test(k)));

afterAll(() => {
  killLeftovers(state);
  // rmSync removes the prefix's links, never what they point at (the checkout).
  rmSync(root, { recursive: true, force: true });
});

function run(command: string, args: readonly string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** [word, count] as the starter job counts them. */
function directCount(text: string): [string, number][] {
  const counts = new Map<string, number>();
  for (const w of text
    .toLowerCase()
    .split(/[^\p{L}\p{N}']+/u)
    .filter((x) => x !== ''))
    counts.set(w, (counts.get(w) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => (a < b ? -1 : 1));
}

const lineOf = (text: string, needle: string): number => text.split('\n').findIndex((l) => l.includes(needle)) + 1;

describe('a new user outside the repository', () => {
  it('installs floe, inits a job folder, type-checks it, runs it, and is told where type errors and failures are', async () => {
    const install = await run(
      'npm',
      ['install', '--global', '--prefix', prefix, '--offline', '--ignore-scripts', '--no-audit', '--no-fund', packageRoot],
      root,
    );
    expect(install.code, install.stderr).toBe(0);
    expect((await run(floe, ['--version'], root)).stdout).toMatch(/^floe \d+\.\d+\.\d+\n$/);

    const init = await run(floe, ['init', 'my-first-job'], root);
    expect(init.code, init.stderr).toBe(0);
    expect(readFileSync(join(work, 'input.txt'), 'utf8')).toBe(STARTER_INPUT);

    // init's own next step: the folder has no TypeScript of its own (npx tsc would fetch an unrelated package).
    expect(init.stdout).toContain('floe check job.ts');
    const check = await run(floe, ['check', 'job.ts'], work);
    expect(check).toEqual({ code: 0, stdout: '', stderr: `job.ts type-checks (compiler options from ${join(work, 'tsconfig.json')})\n` });

    const first = await run(floe, ['--dir', state, 'run', 'job.ts'], work);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(/job 'wordcount' \([0-9a-f]{32}\) FINISHED in/);
    const counted = first.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as [string, number])
      .sort(([a], [b]) => (a < b ? -1 : 1));
    expect(counted).toEqual(directCount(STARTER_INPUT));

    // A type error: the run stops at the user's file, line and column, and submits nothing.
    const starter = readFileSync(join(work, 'job.ts'), 'utf8');
    const typo = starter.replace('[word, 1]', "[word, '1']");
    expect(typo).not.toBe(starter);
    writeFileSync(join(work, 'job.ts'), typo);
    const line = lineOf(typo, "[word, '1']");
    const column = typo.split('\n')[line - 1]!.indexOf("'1'") + 1;
    const typeError = await run(floe, ['--dir', state, 'run', 'job.ts'], work);
    expect(typeError.code).toBe(1);
    expect(typeError.stderr).toContain(`job.ts:${line}:${column} - error TS2322: Type 'string' is not assignable to type 'number'.`);
    expect(typeError.stderr).toContain('nothing was submitted');
    const listed = await run(floe, ['--dir', state, 'list', '--json'], work);
    expect((JSON.parse(listed.stdout) as unknown[]).length).toBe(1);

    // A user function that throws: the printed stack names the user's file and line.
    const throwing = starter.replace(
      '.map((word): [string, number] => [word, 1])',
      ".map((word): [string, number] => {\n      if (word === 'river') throw new Error('no rivers here');\n      return [word, 1];\n    })",
    );
    expect(throwing).not.toBe(starter);
    writeFileSync(join(work, 'job.ts'), throwing);
    const failed = await run(floe, ['--dir', state, 'run', 'job.ts'], work);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/job 'wordcount' \([0-9a-f]{32}\) FAILED after/);
    expect(failed.stderr).toContain('Error: no rivers here');
    expect(failed.stderr).toContain(`(${join(work, 'job.ts')}:${lineOf(throwing, 'no rivers here')}:`);

    // Stopped, the cluster's records still answer; nothing of it is left running.
    expect(await run(floe, ['--dir', state, 'cluster', 'stop'], work)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^cluster stopped/) });
    const stored = await run(floe, ['--dir', state, 'list'], work);
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stderr).toContain('is stopped: these are its stored job records');
    expect(stored.stdout).toMatch(/wordcount +FAILED/);
    expect(stored.stdout).toMatch(/wordcount +FINISHED/);
    expect(processesOfCluster(state)).toEqual([]);

    expect((await run('npm', ['uninstall', '--global', '--prefix', prefix, '--offline', 'floe'], root)).code).toBe(0);
    expect(readFileSync(join(packageRoot, 'package.json'), 'utf8')).toContain('"name": "floe"');
  }, 600_000);
});
