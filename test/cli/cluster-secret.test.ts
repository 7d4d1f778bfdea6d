// A local cluster's secret belongs to its state dir: `floe cluster start` after a stop (or after a
// killed Dispatcher) serves with the same secret, so the workers an earlier Dispatcher left and the new
// one accept each other's calls. A secret file holding anything else stops the start with a clear
// error and is left as the user wrote it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readClusterInfo } from '../../runtime/cli/cluster.js';
import { stateDirSecretPath } from '../../runtime/local/state-dir-secret.js';
import { killLeftovers, processesOfCluster } from '../support/cluster-processes.js';
import { floeProcess } from '../support/floe-process.js';

const stateDir = mkdtempSync(join(tmpdir(), 'floe-cluster-secret-'));

afterAll(() => {
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(stateDir, { recursive: true, force: true });
});

const cli = floeProcess(stateDir);

describe('the local cluster secret', () => {
  it('is the same after a stop and a start, and a secret file holding something else is refused and kept', async () => {
    expect((await cli('cluster', 'start')).code).toBe(0);
    const first = readClusterInfo(stateDir)!.secret;
    expect(readFileSync(stateDirSecretPath(stateDir), 'utf8').trim()).toBe(first);
    expect((await cli('cluster', 'stop')).code).toBe(0);
    expect((await cli('cluster', 'start')).code).toBe(0);
    expect(readClusterInfo(stateDir)!.secret).toBe(first);
    expect((await cli('cluster', 'stop')).code).toBe(0);

    writeFileSync(stateDirSecretPath(stateDir), 'my notes\n');
    const refused = await cli('cluster', 'start');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`cannot start the Dispatcher: ${stateDirSecretPath(stateDir)} does not hold a cluster secret`);
    expect(readFileSync(stateDirSecretPath(stateDir), 'utf8')).toBe('my notes\n');
    expect(existsSync(join(stateDir, 'cluster.json'))).toBe(false);
    expect(processesOfCluster(stateDir)).toEqual([]);
  }, 120_000);
});
