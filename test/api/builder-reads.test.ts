// Recording a builder's reads on the client and answering them in a task, in one process: the task's
// side is given another environment, folder and clock, and must see the client's.
import nodeCrypto from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BuilderReadMismatchError, recordBuilderReads, replayBuilderReads } from '../../runtime/api/builder-reads.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { JOB_GRAPH_LIMITS } from '../../runtime/jobgraph/limits.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-builder-reads-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `fn` with `name` set to `value` in the environment, then puts it back. */
function withEnv<T>(name: string, value: string | undefined, fn: () => T): T {
  const before = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

describe('recordBuilderReads and replayBuilderReads', () => {
  it('give the task the client environment variables, files, folder, clock, random numbers and host facts', () => {
    const file = join(dir, 'conf.json');
    writeFileSync(file, '{"factor":3}');
    const build = () => ({
      min: process.env['FLOE_TEST_MIN'],
      unset: process.env['FLOE_TEST_UNSET'],
      has: 'FLOE_TEST_MIN' in process.env,
      conf: JSON.parse(readFileSync(file, 'utf8')) as unknown,
      bytes: readFileSync(file).length,
      missing: existsSync(join(dir, 'nope')),
      now: Date.now(),
      date: new Date().getTime(),
      random: [Math.random(), Math.random()],
      uuid: globalThis.crypto.randomUUID(),
      nodeUuid: nodeCrypto.randomUUID(),
      randomBytes: nodeCrypto.randomBytes(8).toString('hex'),
      randomInt: nodeCrypto.randomInt(1_000_000),
      randomValues: [...globalThis.crypto.getRandomValues(new Uint8Array(4))],
      perf: performance.now(),
      cwd: process.cwd(),
      listing: readdirSync(dir).sort(),
      size: statSync(file).size,
      os: [os.hostname(), os.homedir(), os.tmpdir(), os.cpus().length, os.availableParallelism(), os.totalmem(), os.freemem(), os.userInfo().username],
    });
    const client = withEnv('FLOE_TEST_MIN', '8', () => recordBuilderReads('job', build));
    writeFileSync(file, '{"factor":99, "longer": true}');
    writeFileSync(join(dir, 'added-later.txt'), '');
    const task = withEnv('FLOE_TEST_MIN', undefined, () => replayBuilderReads('job', client.reads, build));
    expect(task).toEqual(client.result);
    expect(client.result.min).toBe('8');
    expect(client.result.conf).toEqual({ factor: 3 });
    // JSON all the way: what the JobGraph stores.
    expect(JSON.parse(JSON.stringify(client.reads))).toEqual(client.reads);
  });

  it("answer host facts from the recording, not the task's host", () => {
    const build = () => [os.hostname(), os.homedir(), os.cpus().length, process.cwd()];
    const client = recordBuilderReads('job', build);
    const elsewhere = {
      ...client.reads,
      'os.hostname': ['client-laptop'],
      'os.homedir': ['/home/client'],
      'os.cpus': [[{}, {}, {}]],
      'process.cwd': ['/home/client/jobs'],
    };
    expect(replayBuilderReads('job', elsewhere, build)).toEqual(['client-laptop', '/home/client', 3, '/home/client/jobs']);
  });

  it('set a variable the builder sets, and give it back to the builder without recording it', () => {
    const build = () => {
      process.env['FLOE_TEST_SET'] = 'by the builder';
      return process.env['FLOE_TEST_SET'];
    };
    try {
      const client = recordBuilderReads('job', build);
      expect(client.result).toBe('by the builder');
      expect(client.reads).toEqual({});
      delete process.env['FLOE_TEST_SET'];
      expect(replayBuilderReads('job', client.reads, build)).toBe('by the builder');
      // Set for real, so the job's functions see it when they run.
      expect(process.env['FLOE_TEST_SET']).toBe('by the builder');
    } finally {
      delete process.env['FLOE_TEST_SET'];
    }
  });

  it('throw in the task what the read threw on the client', () => {
    const build = () => {
      try {
        return readFileSync(join(dir, 'absent.json'), 'utf8');
      } catch (e) {
        return (e as NodeJS.ErrnoException).code;
      }
    };
    const client = recordBuilderReads('job', build);
    expect(client.result).toBe('ENOENT');
    writeFileSync(join(dir, 'absent.json'), 'now here');
    expect(replayBuilderReads('job', client.reads, build)).toBe('ENOENT');
  });

  it('put everything back when the builder returns or throws', () => {
    const random = Math.random;
    const env = process.env;
    const DateBefore = globalThis.Date;
    expect(() =>
      recordBuilderReads('job', () => {
        throw new Error('builder failed');
      }),
    ).toThrow('builder failed');
    expect(Math.random).toBe(random);
    expect(process.env).toBe(env);
    expect(globalThis.Date).toBe(DateBefore);
  });

  it('name a read the task makes that the client did not', () => {
    const client = recordBuilderReads('job', () => process.env['FLOE_TEST_A']);
    expect(() => replayBuilderReads('job', client.reads, () => process.env['FLOE_TEST_B'])).toThrow(BuilderReadMismatchError);
    expect(() => replayBuilderReads('job', client.reads, () => process.env['FLOE_TEST_B'])).toThrow(
      /read environment variable FLOE_TEST_B in a task but not on the client/,
    );
    const once = recordBuilderReads('job', () => Math.random());
    expect(() => replayBuilderReads('job', once.reads, () => [Math.random(), Math.random()])).toThrow(
      /read Math\.random\(\) in a task 2 times, on the client 1/,
    );
  });

  it('refuse a builder that reads more than a job carries, naming the largest read', () => {
    const big = join(dir, 'big.txt');
    writeFileSync(big, 'x'.repeat(JOB_GRAPH_LIMITS.maxBuilderReadsBytes + 1));
    expect(() => recordBuilderReads('job', () => readFileSync(big, 'utf8'))).toThrow(InvalidJobDefinitionError);
    expect(() => recordBuilderReads('job', () => readFileSync(big, 'utf8'))).toThrow(
      new RegExp(`most in readFileSync\\('${big.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}'\\)`),
    );
  });
});
