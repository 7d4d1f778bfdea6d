// floe run type-checks the job file before bundling it: a type error stops the run at the user's file,
// line and column, in tsc's format, and nothing is submitted. --no-typecheck skips the check.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { typecheckJob } from '../../runtime/cli/typecheck.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-cli-typecheck-');
afterAll(() => harness.cleanup());

const BAD_JOB = `import { defineJob } from 'floe';

export default defineJob('typo', (env) => {
  env.fromSequence(1, 3).map((n) => n.toUpperCase()).collect();
});
`;

describe('type-checking a job before it runs', () => {
  it('reports errors at file:line:col and submits nothing', async () => {
    writeFileSync(join(harness.root, 'bad.ts'), BAD_JOB);
    const run = await harness.cli(['run', 'bad.ts']);
    expect(run.code).toBe(1);
    const line = BAD_JOB.split('\n')[3]!;
    const column = line.indexOf('toUpperCase') + 1;
    expect(run.stderr).toContain(
      `bad.ts:4:${column} - error TS2339: Property 'toUpperCase' does not exist on type 'number'.\n\n4   ${line}\n${' '.repeat(4 + column - 1)}~~~~~~~~~~~\n`,
    );
    expect(run.stderr).toContain('floe: bad.ts does not type-check (1 error); nothing was submitted. Fix it, or run with --no-typecheck to skip the check');
    expect(run.stderr).not.toContain('submitted job');
    // nothing reached the cluster, and none was started for it
    expect(run.stderr).not.toContain('starting one');
    expect((await harness.cli(['list'])).stderr).toMatch(/no cluster is running/);

    const skipped = await harness.cli(['run', 'bad.ts', '--no-typecheck']);
    expect(skipped.stderr).toMatch(/submitted job 'typo' as [0-9a-f]{32}/);
    expect(skipped.code).toBe(0);

    // a plain JavaScript job has no types to check
    writeFileSync(join(harness.root, 'plain.js'), BAD_JOB.replace("'typo'", "'plain'"));
    const plain = await harness.cli(['run', 'plain.js']);
    expect(plain.stderr).toMatch(/submitted job 'plain' as [0-9a-f]{32}/);
  });

  it("uses the job folder's tsconfig.json, with 'floe' always mapped to this install's API", () => {
    const dir = join(harness.root, 'loose');
    mkdirSync(dir);
    // implicit any is an error only under strict
    writeFileSync(
      join(dir, 'job.ts'),
      "import { defineJob } from 'floe';\nconst twice = (x) => x * 2;\nexport default defineJob('loose', (env) => { env.fromSequence(1, 3).map(twice).collect(); });\n",
    );
    const strict = typecheckJob(join(dir, 'job.ts'), dir);
    expect(strict.errorCount).toBe(1);
    expect(strict.report).toMatch(/^job\.ts:2:16 - error TS7006: Parameter 'x' implicitly has an 'any' type\./);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      '{ "compilerOptions": { "strict": false, "module": "ESNext", "moduleResolution": "Bundler", "paths": { "floe": ["./nowhere.d.ts"] } } }',
    );
    const loose = typecheckJob(join(dir, 'job.ts'), dir);
    expect(loose).toMatchObject({ errorCount: 0, report: '', configFile: join(dir, 'tsconfig.json') });
  });

  it('remembers a clean check until a file it read changes', () => {
    const dir = join(harness.root, 'remembered');
    const cache = join(harness.root, 'typecheck-cache');
    mkdirSync(dir);
    writeFileSync(join(dir, 'helper.ts'), 'export const twice = (n: number): number => n * 2;\n');
    writeFileSync(
      join(dir, 'job.ts'),
      "import { defineJob } from 'floe';\nimport { twice } from './helper';\nexport default defineJob('helped', (env) => { env.fromSequence(1, 3).map(twice).collect(); });\n",
    );
    const job = join(dir, 'job.ts');
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 0, cached: false });
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 0, cached: true });
    // an imported file changes: checked again, and the error found
    writeFileSync(join(dir, 'helper.ts'), 'export const twice = (n: string): string => n + n;\n');
    const changed = typecheckJob(job, dir, cache);
    expect(changed).toMatchObject({ errorCount: 1, cached: false });
    expect(changed.report).toMatch(/^job\.ts:3:\d+ - error TS2345/);
    // a failed check is not remembered
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 1, cached: false });
    // back to the very bytes that were checked clean: remembered again
    writeFileSync(join(dir, 'helper.ts'), 'export const twice = (n: number): number => n * 2;\n');
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 0, cached: true });
    // a tsconfig.json that appears changes the options: checked again
    writeFileSync(join(dir, 'tsconfig.json'), '{ "compilerOptions": { "strict": true, "module": "ESNext", "moduleResolution": "Bundler" } }');
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 0, cached: false, configFile: join(dir, 'tsconfig.json') });
    expect(typecheckJob(job, dir, cache)).toMatchObject({ errorCount: 0, cached: true });
  });
});
