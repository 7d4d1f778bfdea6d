// A collect() sink that reaches its cap: floe run says how many records it kept, that more existed, and
// exactly how to keep more (--max-records, or the job's own collect({ maxRecords })).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliHarness } from './cli-harness.js';

// The stand-in Dispatcher's 'many' jobs collect 25 records, cut at the graph's maxRecords.
const harness = new CliHarness('floe-cli-collect-');
afterAll(() => harness.cleanup());

const job = (file: string, collect: string): string => {
  const path = join(harness.root, file);
  writeFileSync(
    path,
    `import { defineJob } from 'floe';\nexport default defineJob('many-records', (env) => { env.fromSequence(1, 25).map((n) => \`record \${n}\`).${collect}; });\n`,
  );
  return path;
};

describe('the collect cap', () => {
  it('is 10000 by default, --max-records sets it, and a reached cap says how to raise it', async () => {
    const file = job('many.ts', 'collect()');
    const all = await harness.cli(['run', file]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout.trim().split('\n')).toHaveLength(25);
    expect(all.stderr).not.toContain('note:');

    const capped = await harness.cli(['run', file, '--max-records', '10', '--', 'in.txt']);
    expect(capped.code, capped.stderr).toBe(0);
    expect(capped.stdout.trim().split('\n')).toEqual(Array.from({ length: 10 }, (_, i) => `record ${i}`));
    expect(capped.stderr).toContain(
      `note: the collect sink kept 10 records and the job produced more, which were dropped (the cap is 10 records): to keep more, run again with --max-records <N>, e.g. floe run ${file} --max-records 10000 -- …\n`,
    );
  });

  it('a cap the job file sets itself is raised there, and --max-records leaves it alone', async () => {
    const file = job('own-cap.ts', 'collect({ maxRecords: 5 })');
    const run = await harness.cli(['run', file, '--max-records', '100']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n')).toHaveLength(5);
    expect(run.stderr).toContain(
      'note: the collect sink kept 5 records and the job produced more, which were dropped (the cap is 5 records): the job file sets it with collect({ maxRecords: 5 }); raise maxRecords there (--max-records applies only to a collect() that sets none)\n',
    );
  });
});
