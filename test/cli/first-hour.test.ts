// What a new user meets in the first hour with `floe`: each command's own help, did-you-mean for -D keys,
// a bad FLOE_CONFIG in one line, job ids shortened to a prefix, a type-check that does not make the
// cluster look busy, and the example's input under the state dir. These run against the stand-in
// Dispatcher (test/fixtures/fake-dispatcher.mjs) or none; first-hour-cluster.test.ts runs a real one.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fullJobId } from '../../runtime/cli/job-source.js';
import { distEntry } from '../../runtime/core/paths.js';
import type { JobSummary } from '../../runtime/protocol/rest-api.js';
import { CliHarness } from './cli-harness.js';

const harness = new CliHarness('floe-first-hour-');
afterAll(() => harness.cleanup());

const JOB = "import { defineJob } from 'floe';\nexport default defineJob('first-hour', (env) => { env.fromSequence(1, 3).collect(); });\n";
writeFileSync(join(harness.root, 'job.ts'), JOB);

describe('help', () => {
  it("prints a command's own page for floe <command> --help and floe help <command>", async () => {
    const run = await harness.cli(['run', '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] run <job\.ts>/);
    expect(run.stdout).toContain('--max-records N');
    expect(run.stdout).not.toContain('cluster start');

    const status = await harness.cli(['help', 'status']);
    expect(status.stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] status <jobId> \[--json\]/);
    expect(status.stdout).toContain('prefix');
    expect(status.stdout).not.toContain('--max-records');
    expect((await harness.cli(['cluster', 'stop', '-h'])).stdout).toMatch(/^Usage: floe \[--dir <stateDir>\] cluster start/);

    const global = await harness.cli(['--help']);
    for (const command of ['init', 'check', 'run', 'list', 'status', 'cancel', 'logs', 'cluster', 'example'])
      expect(global.stdout).toContain(`\n  ${command} `);
  });
});

describe('config mistakes', () => {
  it('suggests the nearest keys for an unknown -D key instead of listing all of them', async () => {
    const typo = await harness.cli(['cluster', 'start', '-D', 'heartbeat.timout=5000']);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain("unknown option 'heartbeat.timout': did you mean 'heartbeat.timeout'?");
    expect(typo.stderr).not.toContain('slot.idle.timeout');
    const tail = await harness.cli(['run', 'job.ts', '-D', 'taskmanager.numberOfSlots=4']);
    expect(tail.code).toBe(1);
    expect(tail.stderr).toContain("did you mean 'taskmanager.numberOfTaskSlots'?");
    // Nothing near: the known keys are listed.
    expect((await harness.cli(['cluster', 'start', '-D', 'zzzzzz=1'])).stderr).toContain('(known: heartbeat.interval, ');
    expect(existsSync(join(harness.stateDir, 'cluster.json'))).toBe(false);
  });

  it('reports a bad FLOE_CONFIG in one line naming it and what is wrong, and starts no Dispatcher', async () => {
    const env = (value: string): Record<string, string | undefined> => ({ FLOE_HOME: harness.stateDir, PATH: process.env['PATH'], FLOE_CONFIG: value });
    const io = (value: string) => ({ env: env(value), dispatcherEntry: distEntry('dispatcher') });
    const cut = await harness.cli(['cluster', 'start'], io('{"heartbeat.timeout": 5'));
    expect(cut.code).toBe(1);
    expect(cut.stderr).toMatch(
      /^floe: FLOE_CONFIG is not valid JSON \(.*\): FLOE_CONFIG takes a JSON object of option keys to values, e\.g\. .*; found '\{"heartbeat\.timeout": 5'\n$/,
    );

    const file = await harness.cli(['cluster', 'start'], io('conf/floe.json'));
    expect(file.stderr).toBe(
      `floe: FLOE_CONFIG takes a JSON object of option keys to values, e.g. FLOE_CONFIG='{"heartbeat.timeout": 20000}', not a file name; found 'conf/floe.json'. To use a file's options, pass its content: FLOE_CONFIG="$(cat conf/floe.json)"\n`,
    );

    const wrong = await harness.cli(['run', 'job.ts'], io('{"heartbeat.timeout": "soon"}'));
    expect(wrong.code).toBe(1);
    expect(wrong.stderr.split('\n').filter((l) => l !== '')).toEqual([
      `floe: FLOE_CONFIG: invalid configuration: 'heartbeat.timeout' must be an integer, found "soon"`,
    ]);
    expect(existsSync(join(harness.stateDir, 'cluster.json'))).toBe(false);
  });
});

describe('job ids', () => {
  const summary = (jobId: string, name: string): JobSummary =>
    ({ jobId, name, status: 'FINISHED', submittedAtMs: 0, updatedAtMs: 0, durationMs: 0, parallelism: 1 }) as unknown as JobSummary;
  const jobs = [summary(`9f2c${'0'.repeat(27)}1`, 'squares'), summary(`9f2c${'0'.repeat(27)}2`, 'cubes'), summary(`a1${'0'.repeat(30)}`, 'words')];
  const list = async (): Promise<readonly JobSummary[]> => jobs;

  it('takes a unique prefix (with or without the … of a shortened id) and names every candidate of an ambiguous one', async () => {
    expect(await fullJobId('a1', list)).toBe(jobs[2]!.jobId);
    expect(await fullJobId('a1…', list)).toBe(jobs[2]!.jobId);
    expect(await fullJobId('a1...', list)).toBe(jobs[2]!.jobId);
    expect(await fullJobId(`9f2c${'0'.repeat(27)}2`, list)).toBe(jobs[1]!.jobId);
    await expect(fullJobId('9f2c…', list)).rejects.toThrow(
      `'9f2c' is the start of 2 job ids: ${jobs[0]!.jobId} (squares, FINISHED), ${jobs[1]!.jobId} (cubes, FINISHED); give more of the id`,
    );
    await expect(fullJobId('77', list)).rejects.toThrow("no job id starts with '77' ('floe list' shows the jobs)");
    await expect(fullJobId('my job', list)).rejects.toThrow("'my job' is not a job id: expected an id as 'floe list' shows it, or its first few characters");
  });

  it('lets status, cancel and logs name a job by a prefix of its id', async () => {
    const dir = join(harness.root, 'ids');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'job.ts'), JOB);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const submitted = await harness.cli(['run', 'job.ts', '--detached'], { cwd: dir });
      expect(submitted.code, submitted.stderr).toBe(0);
      ids.push(submitted.stdout.trim());
    }
    // The shortest prefix of the first id that the second does not share.
    let n = 1;
    while (ids[1]!.startsWith(ids[0]!.slice(0, n))) n++;
    const prefix = ids[0]!.slice(0, Math.max(n, 4));
    const status = await harness.cli(['status', `${prefix}…`]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`(${ids[0]})`);
    const cancel = await harness.cli(['cancel', prefix]);
    expect(cancel).toMatchObject({ code: 0, stdout: `cancellation of job ${ids[0]} requested (status CANCELLING)\n` });
    const logs = await harness.cli(['logs', prefix]);
    expect(logs.stderr).toContain(`no log of job ${ids[0]} under`);
  });
});

describe('floe run beside a slow type-check', () => {
  it('does not call a cluster that answers busy because its own type-check held the thread', async () => {
    const dir = join(harness.root, 'slow-check');
    mkdirSync(dir, { recursive: true });
    // Enough typed code that checking it holds the thread well past the probe's deadline (here 200 ms).
    const typed = Array.from(
      { length: 1500 },
      (_, i) => `export const f${i} = (r: { a: number; b: string[] }): [string, number] => [r.b.join('${i}'), r.a + ${i}];`,
    );
    writeFileSync(join(dir, 'job.ts'), `${JOB}${typed.join('\n')}\n`);
    expect((await harness.cli(['cluster', 'start'])).code).toBe(0);
    const run = await harness.cli(['run', 'job.ts', '--verbose'], { cwd: dir, busyWaitMs: 200 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/type-check \d+ ms \(checked\)/);
    expect(Number(/type-check (\d+) ms/.exec(run.stderr)![1])).toBeGreaterThan(200);
    expect(run.stderr).not.toContain('busy');
  });
});

describe('floe example', () => {
  it('keeps its sample input under the state dir that $FLOE_HOME names', async () => {
    const home = join(harness.root, 'example-home');
    mkdirSync(home, { recursive: true });
    const example = await harness.cli(['example', 'log-levels'], { env: { FLOE_HOME: home, PATH: process.env['PATH'] } });
    harness.track();
    expect(example.stderr).toContain(`sample logs in ${join(home, 'example', 'logs.txt')}\n`);
    expect(existsSync(join(home, 'example', 'logs.txt'))).toBe(true);
  }, 60_000);
});
