// Several commands starting the same stopped cluster at once, as `floe run` in a few terminals or a
// script's parallel jobs do: one Dispatcher process serves, the others use it, and `floe cluster stop`
// leaves no process behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killLeftovers, processesOfCluster } from '../support/cluster-processes.js';
import { floeProcess } from '../support/floe-process.js';

const stateDir = mkdtempSync(join(tmpdir(), 'floe-concurrent-start-'));

afterAll(() => {
  expect(killLeftovers(stateDir)).toBe(0);
  rmSync(stateDir, { recursive: true, force: true });
});

const cli = floeProcess(stateDir);

describe('starting a stopped cluster from several commands at once', () => {
  it('runs one Dispatcher, which all of them use, and stop leaves nothing', async () => {
    const starts = await Promise.all([cli('cluster', 'start'), cli('cluster', 'start'), cli('cluster', 'start')]);
    for (const s of starts) expect(s.code, s.stderr).toBe(0);
    const started = starts.filter((s) => s.stdout.startsWith('cluster started at'));
    expect(started, starts.map((s) => s.stdout).join('')).toHaveLength(1);
    const pid = /\(pid (\d+)\)/.exec(started[0]!.stdout)![1];
    for (const s of starts.filter((x) => x !== started[0])) expect(s.stdout).toMatch(new RegExp(`^a cluster is already running at \\S+ \\(pid ${pid}\\)`));
    // The cluster's only process is that Dispatcher: none was left unregistered beside it.
    expect(processesOfCluster(stateDir)).toEqual([Number(pid)]);

    const stop = await cli('cluster', 'stop');
    expect(stop.stdout).toBe(`cluster stopped (pid ${pid})\n`);
    expect(processesOfCluster(stateDir)).toEqual([]);
  }, 120_000);
});
