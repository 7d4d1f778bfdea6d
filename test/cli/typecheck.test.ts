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
  });

  it("uses the job folder's tsconfig.json, with 'floe' always mapped to this install's API", () => {
    const dir = join(harness.root, 'loose');
    mkdirSync(dir);
    // implicit any is an error only under strict
    writeFileSync(join(dir, 'job.ts'), "import { defineJob } from 'floe';\nconst twice = (x) => x * 2;\nexport default defineJob('loose', (env) => { env.fromSequence(1, 3).map(twice).collect(); });\n");
    const strict = typecheckJob(join(dir, 'job.ts'), dir);
    expect(strict.errorCount).toBe(1);
    expect(strict.report).toMatch(/^job\.ts:2:16 - error TS7006: Parameter 'x' implicitly has an 'any' type\./);
    writeFileSync(join(dir, 'tsconfig.json'), '{ "compilerOptions": { "strict": false, "module": "ESNext", "moduleResolution": "Bundler", "paths": { "floe": ["./nowhere.d.ts"] } } }');
    const loose = typecheckJob(join(dir, 'job.ts'), dir);
    expect(loose).toMatchObject({ errorCount: 0, report: '', configFile: join(dir, 'tsconfig.json') });
  });
});
