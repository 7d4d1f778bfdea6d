// `floe savepoint`, `floe stop --savepoint` and `floe run --from-savepoint` against a real cluster: each
// prints the savepoint's path, stop prints how the job ended, and a job run from the savepoint at another
// parallelism prints every key's exact count; a savepoint of an ended job is refused, saying so.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { loadConfig } from '../../runtime/core/config.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/local/embedded-dispatcher.js';
import { killLeftovers, waitFor } from '../support/cluster-processes.js';
import { expectedCounts } from '../fixtures/jobs/restore-counts.js';

const root = mkdtempSync(join(tmpdir(), 'floe-cli-savepoints-'));
const clusterDir = join(root, 'cluster');
const savepoints = join(root, 'savepoints');
const JOB = join(import.meta.dirname, '..', 'fixtures', 'jobs', 'restore-counts.ts');
const JOB_ARGS = ['--', '4000', '600', '16', '300'];
let cluster: EmbeddedDispatcher;

beforeAll(async () => {
  cluster = await startEmbeddedDispatcher({ stateDir: clusterDir, config: loadConfig({ 'taskmanager.numberOfTaskSlots': 2 }), logger: silentLogger });
}, 60_000);

afterAll(async () => {
  await cluster?.close();
  killLeftovers(clusterDir);
  rmSync(root, { recursive: true, force: true });
});

async function floe(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: { FLOE_HOME: join(root, 'home'), PATH: process.env['PATH'], FLOE_SECRET: cluster.secret, FLOE_URL: cluster.url },
    cwd: root,
    pollIntervalMs: 20,
  };
  return { code: await main(argv, io), stdout, stderr };
}

describe('floe savepoint, stop and run --from-savepoint', () => {
  it('take savepoints, stop the job, and resume it at another parallelism with every count exact', async () => {
    const submitted = await floe('run', JOB, '--export', 'countPerKey', '-p', '2', '--detached', ...JOB_ARGS);
    expect(submitted.code, submitted.stderr).toBe(0);
    const jobId = submitted.stdout.trim();

    // Refused while the job's tasks are being deployed: asked again.
    const taken = await waitFor(
      async () => {
        const r = await floe('savepoint', jobId.slice(0, 8), savepoints);
        if (r.code === 0) return r;
        expect(r.stderr).toMatch(/not running|not every task of the job is running|has no JobMaster now/);
        return undefined;
      },
      'a savepoint',
      60_000,
      100,
    );
    const path = /^savepoint completed: (\S+)\n$/.exec(taken.stdout)?.[1];
    expect(path, taken.stdout).toMatch(new RegExp(`^file://${savepoints}/savepoint-${jobId.slice(0, 6)}-[0-9a-f]{12}$`));
    expect(taken.stderr).toContain(`floe run <job.ts> --from-savepoint ${path}`);

    const stop = await floe('stop', jobId, '--savepoint', savepoints);
    expect(stop.code, stop.stderr).toBe(0);
    const lines = stop.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    const stopped = /^savepoint completed: (\S+)$/.exec(lines[0]!)?.[1];
    expect(stopped).toMatch(/\/savepoint-[0-9a-f]{6}-[0-9a-f]{12}$/);
    expect(stopped).not.toBe(path);
    expect(lines[1]).toBe(`job ${jobId} stopped: FINISHED`);
    expect(readdirSync(savepoints)).toHaveLength(2);

    const resumed = await floe('run', JOB, '--export', 'countPerKey', '-p', '3', '--from-savepoint', stopped!, ...JOB_ARGS);
    expect(resumed.code, resumed.stderr).toBe(0);
    const counts = new Map(
      resumed.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as [number, number, number])
        .map(([k, n]) => [k, n]),
    );
    expect(counts).toEqual(expectedCounts(4000, 16));

    const ended = await floe('savepoint', jobId, savepoints);
    expect(ended.code).toBe(1);
    expect(ended.stderr).toContain(`job ${jobId} already ended FINISHED; a savepoint needs a running job`);
  }, 240_000);

  it('says what is wrong with a savepoint path that names none', async () => {
    const run = await floe('run', JOB, '--export', 'countPerKey', '-p', '1', '--from-savepoint', join(root, 'no-such-savepoint'), ...JOB_ARGS);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`the savepoint at ${join(root, 'no-such-savepoint')} could not be read`);
  }, 120_000);
});
