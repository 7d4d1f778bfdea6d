// floe init writes a starter job folder and never overwrites what is there.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { API_TYPES_FILE } from '../../runtime/cli/typecheck.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-cli-init-');
afterAll(() => harness.cleanup());

describe('floe init', () => {
  it('writes job.ts, input.txt and a tsconfig.json that maps floe to this install, and says what next', async () => {
    const init = await harness.cli(['init', 'first']);
    expect(init.code, init.stderr).toBe(0);
    const dir = join(harness.root, 'first');
    expect(readdirSync(dir).sort()).toEqual(['input.txt', 'job.ts', 'tsconfig.json']);
    expect(init.stdout).toBe(
      `wrote job.ts, input.txt, tsconfig.json in ${dir}\n\nnext:\n  cd first\n` +
        `  floe check job.ts     type-checks the job as floe run does and your editor does: tsconfig.json\n` +
        `                        maps 'floe' to ${API_TYPES_FILE}\n` +
        `  floe run job.ts       counts the words of input.txt on a local cluster (started on first use)\n`,
    );
    expect(readFileSync(join(dir, 'job.ts'), 'utf8')).toContain("import { defineJob } from 'floe';");
    expect(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).toContain(`"paths": { "floe": [${JSON.stringify(API_TYPES_FILE)}] }`);
  });

  it('makes a folder that floe check type-checks, and floe check reports type errors as tsc does', async () => {
    const dir = join(harness.root, 'checked');
    expect((await harness.cli(['init', 'checked'])).code).toBe(0);
    const clean = await harness.cli(['check', 'job.ts'], { cwd: dir });
    expect(clean).toEqual({ code: 0, stdout: '', stderr: `job.ts type-checks (compiler options from ${join(dir, 'tsconfig.json')})\n` });
    const starter = readFileSync(join(dir, 'job.ts'), 'utf8');
    writeFileSync(join(dir, 'job.ts'), starter.replace('[word, 1]', "[word, '1']"));
    const line = starter.split('\n').findIndex((l) => l.includes('[word, 1]')) + 1;
    const typo = await harness.cli(['check', 'checked/job.ts']);
    expect(typo.code).toBe(1);
    expect(typo.stdout).toContain(`checked/job.ts:${line}:`);
    expect(typo.stdout).toContain("error TS2322: Type 'string' is not assignable to type 'number'.");
    expect(typo.stderr).toBe(
      `floe: checked/job.ts does not type-check (1 error; compiler options from ${join(dir, 'tsconfig.json')}): fix it and check again\n`,
    );
    expect(existsSync(harness.stateDir)).toBe(false);
    expect(await harness.cli(['check', 'nope.ts'])).toMatchObject({
      code: 1,
      stderr: `floe: job file ${join(harness.root, 'nope.ts')} does not exist: name a job file, e.g. floe check job.ts\n`,
    });
  });

  it('refuses when any of its files exists, and writes none of them', async () => {
    const dir = join(harness.root, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'job.ts'), 'my own job');
    writeFileSync(join(dir, 'tsconfig.json'), '{}');
    const init = await harness.cli(['init'], { cwd: dir });
    expect(init.code).toBe(1);
    expect(init.stderr).toBe(
      `floe: ${dir} already has job.ts, tsconfig.json: floe init never overwrites files. Run it in an empty folder (floe init <dir>), or move those files away first\n`,
    );
    expect(readFileSync(join(dir, 'job.ts'), 'utf8')).toBe('my own job');
    expect(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).toBe('{}');
    expect(existsSync(join(dir, 'input.txt'))).toBe(false);
  });
});
