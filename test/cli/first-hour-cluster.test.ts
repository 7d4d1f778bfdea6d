// What `floe run` and `floe logs` tell a new user on a real local cluster: a collect() that received no
// record says so, a writeAsText job names its output, a missing input is refused at submission naming the
// path, what user code wrote to stderr shows as ERR, and the progress line counts records and splits.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { distEntry } from '../../runtime/core/paths.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-first-hour-cluster-');
afterAll(async () => {
  await harness.cli(['cluster', 'stop']);
  harness.cleanup();
});

// One file per job: each is its own library.
const IMPORT = "import { defineJob } from 'floe';\n";
writeFileSync(
  join(harness.root, 'none.ts'),
  `${IMPORT}export default defineJob('none-kept', (env) => {
  env.fromSequence(1, 10).filter((n) => n > 100).collect();
});
`,
);
writeFileSync(
  join(harness.root, 'written.ts'),
  `${IMPORT}export default defineJob('written', (env, args) => {
  env
    .fromSequence(1, 5)
    .map((n) => {
      if (n === 3) {
        console.error('trouble with ' + n);
        console.log('all fine with ' + n);
      }
      return 'line ' + n;
    })
    .writeAsText(args[0]!);
});
`,
);
writeFileSync(
  join(harness.root, 'rolled.ts'),
  `${IMPORT}export default defineJob('rolled', (env, args) => {
  env.enableCheckpointing(100);
  env
    .fromSequence(1, 40)
    // A map may return a promise: 40 records of 40 ms each span several checkpoints, each of which rolls a part.
    .map((n) => new Promise<string>((resolve) => setTimeout(() => resolve('line ' + n), 40)) as unknown as string)
    .writeAsText(args[0]!);
});
`,
);
writeFileSync(
  join(harness.root, 'counted.ts'),
  `${IMPORT}export default defineJob('counted', (env, args) => {
  env.readTextFile(args[0]!, { splitSizeBytes: 100 }).map((l) => l.length).collect();
});
`,
);
/** The built CLI as a user's shell runs it, in the folder of the job files. */
const cli = (...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const env = { FLOE_HOME: harness.stateDir, PATH: process.env['PATH'] };
    execFile(process.execPath, [distEntry('cli'), ...argv], { cwd: harness.root, env, timeout: 90_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr }),
    );
  });

describe('floe run on a local cluster, as a new user reads it', () => {
  it('says that a collect() received 0 records', async () => {
    const run = await cli('run', 'none.ts');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('the collect sink received 0 records\n');
  }, 120_000);

  let writtenJobId: string | undefined;
  it("names a writeAsText job's output", async () => {
    const out = join(harness.root, 'out');
    const run = await cli('run', 'written.ts', '-p', '1', '--', out);
    expect(run.code, run.stderr).toBe(0);
    writtenJobId = /as ([0-9a-f]{32})\n/.exec(run.stderr)![1]!;
    expect(readFileSync(join(out, 'part-0'), 'utf8')).toBe('line 1\nline 2\nline 3\nline 4\nline 5\n');
    expect(run.stderr).toMatch(new RegExp(`FINISHED in .*\\noutput written to ${out} \\(1 part file and _SUCCESS\\)\\n`));
  }, 120_000);

  it("counts the part files a checkpointing job's writeAsText rolled, several per subtask", async () => {
    const out = join(harness.root, 'rolled-out');
    const run = await cli('run', 'rolled.ts', '-p', '1', '--', out);
    expect(run.code, run.stderr).toBe(0);
    const parts = readdirSync(out).filter((n) => !n.startsWith('.') && !n.startsWith('_'));
    expect(parts.length).toBeGreaterThan(1);
    const lines = parts.flatMap((p) =>
      readFileSync(join(out, p), 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );
    expect(lines.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `line ${i + 1}`).sort());
    const manifest = readdirSync(out).includes('_SUCCESS') ? ' and _SUCCESS' : '';
    expect(run.stderr).toContain(`\noutput written to ${out} (${parts.length} part files${manifest})\n`);
  }, 120_000);

  it('shows what user code wrote to stderr as ERR in floe logs, and what it wrote to stdout as OUT', async () => {
    const logs = await cli('logs', writtenJobId!);
    expect(logs.code, logs.stderr).toBe(0);
    const lines = logs.stdout.split('\n');
    expect(lines.filter((l) => l.endsWith('trouble with 3'))).toEqual([expect.stringMatching(/ taskexecutor \S+ {2}ERR {4}trouble with 3$/)]);
    expect(lines.filter((l) => l.endsWith('all fine with 3'))).toEqual([expect.stringMatching(/ taskexecutor \S+ {2}OUT {4}all fine with 3$/)]);
  }, 120_000);

  it('shows records in and out and the splits read of all in the progress line', async () => {
    const lines = Array.from({ length: 60 }, (_, i) => `line ${i} of the input`);
    const text = `${lines.join('\n')}\n`;
    writeFileSync(join(harness.root, 'input.txt'), text);
    const run = await cli('run', 'counted.ts', '-p', '2', '--', 'input.txt');
    expect(run.code, run.stderr).toBe(0);
    expect(
      run.stdout
        .trim()
        .split('\n')
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual(lines.map((l) => l.length).sort((a, b) => a - b));
    const splits = Math.ceil(Buffer.byteLength(text) / 100);
    expect(run.stderr).toMatch(
      new RegExp(`\\nFINISHED · tasks 2/2 finished, 0 running, 0 scheduled · records 60 in, 60 out · splits ${splits}/${splits} \\(100%\\) · `),
    );
  }, 120_000);

  it('refuses a job whose input path does not exist at submission, naming the path', async () => {
    const before = JSON.parse((await cli('list', '--json')).stdout) as unknown[];
    const run = await cli('run', 'counted.ts', '--', 'no-such-input.txt');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`'${join(harness.root, 'no-such-input.txt')}' does not exist`);
    expect(run.stderr).not.toContain('submitted job');
    expect(JSON.parse((await cli('list', '--json')).stdout)).toHaveLength(before.length);
  }, 120_000);
});
