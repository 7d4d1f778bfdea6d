// floe init writes a starter job folder and never overwrites what is there.
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FLOE_TYPES } from '../../runtime/cli/typecheck.js';
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
        `  floe run job.ts       counts the words of input.txt on a local cluster (started on first use)\n` +
        `  tsc --noEmit          type-checks the folder as your editor does: tsconfig.json maps 'floe' to\n                        ${FLOE_TYPES}\n`,
    );
    expect(readFileSync(join(dir, 'job.ts'), 'utf8')).toContain("import { defineJob } from 'floe';");
    expect(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).toContain(`"paths": { "floe": [${JSON.stringify(FLOE_TYPES)}] }`);
  });

  it('refuses when any of its files exists, and writes none of them', async () => {
    const dir = join(harness.root, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'job.ts'), 'my own job');
    writeFileSync(join(dir, 'tsconfig.json'), '{}');
    const init = await harness.cli(['init'], { cwd: dir });
    expect(init.code).toBe(1);
    expect(init.stderr).toBe(`floe: ${dir} already has job.ts, tsconfig.json: floe init never overwrites files. Run it in an empty folder (floe init <dir>), or move those files away first\n`);
    expect(readFileSync(join(dir, 'job.ts'), 'utf8')).toBe('my own job');
    expect(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).toBe('{}');
    expect(existsSync(join(dir, 'input.txt'))).toBe(false);
  });
});
