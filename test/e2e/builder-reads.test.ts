// A job's builder runs on the client and again in every task. Whatever it reads beyond its arguments —
// an environment variable, a file by a relative path, the clock, random numbers — must give the tasks
// the client's values, on an embedded cluster whose processes see another environment and another
// working directory; a builder that makes another plan in a task fails at once, naming the operator.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../support/cluster-processes.js';
import { floeProcess, type FloeProcessResult } from '../support/floe-process.js';

const root = mkdtempSync(join(tmpdir(), 'floe-builder-reads-'));
const state = join(root, 'state');
const work = join(root, 'my-jobs');
mkdirSync(work);

// The user's shell: none of this test run's Floe settings.
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(FLOE_|VITEST|NODE_OPTIONS$)/i.test(k))) as Record<string, string>;

/** `floe --dir <state> …args` run from the jobs' folder, in the user's shell with `extraEnv` added. */
const floe = (args: readonly string[], extraEnv: Record<string, string> = {}): Promise<FloeProcessResult> =>
  floeProcess(state, { cwd: work, env: { ...baseEnv, ...extraEnv } })(...args);

function jobFile(name: string, source: string): string {
  writeFileSync(join(work, name), `import { defineJob } from 'floe';\n${source}`);
  return name;
}

/** The lines a collect() sink printed, in order of the records' own sort. */
const printed = (stdout: string): string[] =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('r '))
    .sort();

beforeAll(async () => {
  // Started without the variables the jobs read: its TaskExecutors never see them.
  const start = await floe(['cluster', 'start']);
  expect(start.code, start.stderr).toBe(0);
});

afterAll(async () => {
  try {
    await floe(['cluster', 'stop']);
  } finally {
    killLeftovers(state);
    rmSync(root, { recursive: true, force: true });
  }
});

describe("a builder's reads beyond its arguments", () => {
  it('an environment variable: the tasks filter with the client value', async () => {
    const job = jobFile(
      'env.ts',
      `export default defineJob('env-filter', (env) => {
        const min = Number(process.env.MIN_VALUE);
        env.fromSequence(1, 20).setParallelism(2).filter((n) => n >= min).map((n) => 'r ' + String(n).padStart(2, '0')).collect();
      });`,
    );
    const run = await floe(['run', job, '--no-typecheck'], { MIN_VALUE: '8' });
    expect(run.code, run.stderr).toBe(0);
    expect(printed(run.stdout)).toEqual(Array.from({ length: 13 }, (_, i) => `r ${String(i + 8).padStart(2, '0')}`));
  });

  it('a file read by a path relative to where floe run runs', async () => {
    writeFileSync(join(work, 'conf.json'), JSON.stringify({ factor: 7 }));
    const job = jobFile(
      'conf.ts',
      `import { readFileSync } from 'node:fs';
      export default defineJob('conf-factor', (env) => {
        const { factor } = JSON.parse(readFileSync('conf.json', 'utf8'));
        env.fromSequence(1, 6).setParallelism(3).map((n) => 'r ' + String(n * factor).padStart(2, '0')).collect();
      });`,
    );
    const run = await floe(['run', job, '--no-typecheck']);
    expect(run.code, run.stderr).toBe(0);
    expect(printed(run.stdout)).toEqual(['r 07', 'r 14', 'r 21', 'r 28', 'r 35', 'r 42']);
  });

  it('the clock and Math.random(): every task sees the values the client saw', async () => {
    const job = jobFile(
      'clock.ts',
      `export default defineJob('clock-and-random', (env) => {
        const startedAt = Date.now();
        const day = new Date().toISOString();
        const salt = Math.random();
        console.log('client: ' + JSON.stringify([startedAt, day, salt]));
        env.fromSequence(1, 4).setParallelism(4).map((n) => 'r ' + n + ' ' + JSON.stringify([startedAt, day, salt])).collect();
      });`,
    );
    const run = await floe(['run', job, '--no-typecheck']);
    expect(run.code, run.stderr).toBe(0);
    const client = /client: (.*)/.exec(run.stdout)?.[1];
    expect(client, run.stdout).toBeDefined();
    expect(printed(run.stdout)).toEqual([1, 2, 3, 4].map((n) => `r ${n} ${client}`));
  });

  it('a builder that makes another operator in a task fails at once, naming it', async () => {
    // isMainThread differs between the client and a task's slot thread and is no read that can be
    // recorded: the plan's fingerprint is what catches it.
    const job = jobFile(
      'thread.ts',
      `import { isMainThread } from 'node:worker_threads';
      export default defineJob('thread-dependent', (env) => {
        const numbers = env.fromSequence(1, 10);
        const kept = isMainThread ? numbers.filter((n) => n % 2 === 0).name('keep even') : numbers.map((n) => n * 2).name('double');
        kept.map((n) => 'r ' + n).collect();
      });`,
    );
    const run = await floe(['run', job, '--no-typecheck']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/operator 'keep even' is a filter on the client, the task's builder made a map \('double'\) in its place/);
    // Not restarted: a plan that differs would differ again.
    expect(run.stderr).toMatch(/not restartable/);
    expect(run.stderr).not.toMatch(/attempt 1 /);
    expect(run.stdout).not.toMatch(/^r /m);
  });

  it('a builder that enumerates the environment is refused at submission, saying what to do', async () => {
    const job = jobFile(
      'enumerate.ts',
      `export default defineJob('env-dump', (env) => {
        const names = Object.keys(process.env);
        env.fromCollection(names).map((n) => 'r ' + n).collect();
      });`,
    );
    const run = await floe(['run', job, '--no-typecheck']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/enumerates process\.env .*read the variables it needs by name/);
    expect(run.stdout + run.stderr).not.toMatch(/submitted job/);
  });
});

describe('every attempt starts fresh', () => {
  it("a counter kept in the builder's closure gives, after a failure, the output of a run without one", async () => {
    const marker = join(root, 'failed-once');
    const job = jobFile(
      'counter.ts',
      `import { existsSync, writeFileSync } from 'node:fs';
      export default defineJob('closure-counter', (env, args) => {
        let seen = 0;
        env.setParallelism(1);
        env
          .fromSequence(0, 99)
          .setParallelism(1)
          .map((n) => {
            seen++;
            if (args[0] !== undefined && n === 50 && !existsSync(args[0])) {
              writeFileSync(args[0], 'x');
              throw new Error('fails once, at record 50');
            }
            return 'r ' + String(n).padStart(3, '0') + ' ' + seen;
          })
          .collect();
      });`,
    );
    const clean = await floe(['run', job, '--no-typecheck']);
    expect(clean.code, clean.stderr).toBe(0);
    expect(printed(clean.stdout)).toEqual(Array.from({ length: 100 }, (_, n) => `r ${String(n).padStart(3, '0')} ${n + 1}`));

    const failing = await floe(['run', job, '--no-typecheck', '--', marker]);
    expect(failing.code, failing.stderr).toBe(0);
    expect(existsSync(marker)).toBe(true);
    expect(failing.stderr).toMatch(/1 restart/);
    expect(printed(failing.stdout)).toEqual(printed(clean.stdout));
  });
});
