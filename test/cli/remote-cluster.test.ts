// `floe --url …` against a cluster it does not manage (as a deployed one): the REST endpoint and the
// secret from the environment, no local state dir involved.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import { loadConfig } from '../../runtime/core/config.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/local/embedded-dispatcher.js';
import { killLeftovers } from '../support/cluster-processes.js';

const root = mkdtempSync(join(tmpdir(), 'floe-cli-remote-'));
const clusterDir = join(root, 'cluster');
let cluster: EmbeddedDispatcher;

beforeAll(async () => {
  cluster = await startEmbeddedDispatcher({ stateDir: clusterDir, config: loadConfig({ 'taskmanager.numberOfTaskSlots': 2 }), logger: silentLogger });
});

afterAll(async () => {
  await cluster?.close();
  killLeftovers(clusterDir);
  rmSync(root, { recursive: true, force: true });
});

async function cli(env: Record<string, string>, ...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    // FLOE_HOME points at an empty folder: nothing local may be used or started.
    env: { FLOE_HOME: join(root, 'nothing-here'), PATH: process.env['PATH'], ...env },
    cwd: root,
    pollIntervalMs: 20,
  };
  return { code: await main(argv, io), stdout, stderr };
}

describe('floe against a cluster named by --url', () => {
  it('runs a job there and lists it, with the secret from FLOE_SECRET', async () => {
    const job = join(import.meta.dirname, '..', 'fixtures', 'jobs', 'e2e-words.ts');
    const run = await cli({ FLOE_SECRET: cluster.secret }, '--url', cluster.url, 'run', job, '--export', 'spare', '-p', '2');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/starting one/);
    expect(
      run.stdout
        .trim()
        .split('\n')
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 1000 }, (_, i) => (i + 1) ** 2));
    const list = await cli({ FLOE_SECRET: cluster.secret, FLOE_URL: cluster.url }, 'list', '--json');
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ name: 'sequence-squares', status: 'FINISHED' })]);
  });

  it('says how to get the secret when it is missing, and that a wrong one is refused', async () => {
    const missing = await cli({}, '--url', cluster.url, 'list');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/needs its secret: set FLOE_SECRET/);
    const wrong = await cli({ FLOE_SECRET: 'not-the-secret' }, '--url', cluster.url, 'list');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/secret/);
  });

  it('rejects a --url that is not an http(s) URL', async () => {
    const res = await cli({ FLOE_SECRET: 'x' }, '--url', 'ftp://nowhere', 'list');
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--url needs an http\(s\) URL/);
  });
});
