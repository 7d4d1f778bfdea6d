// Resource profiles on the embedded backend with real processes: a job of two profiled groups finishes, a
// profiled group's TaskExecutor process is started with its profile's memory as V8's heap limit, and a
// profile larger than the machine is refused at submission.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses, waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('profiles', { 'taskmanager.numberOfTaskSlots': 2 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

describe('resource profiles on the embedded backend', () => {
  it('runs a job of two profiled groups to FINISHED with the right output', async () => {
    const { work } = cluster;
    const lines = Array.from({ length: 500 }, (_, i) => `alpha beta ${i} gamma`);
    const input = join(work, 'profiled.txt');
    writeFileSync(input, lines.join('\n') + '\n');
    const out = join(work, 'profiled-out');
    // parse: 0.25 vCPU, 1024 MiB per slot; heavy: 0.5 vCPU, 1500 MiB per slot (within any test machine).
    const jobId = await cluster.submit('e2e-profiles.ts', 'default', [input, out, '0.5', '1500'], 2);
    const job = await cluster.awaitTerminal(jobId);
    expect(job.status, await cluster.exceptions(jobId)).toBe('FINISHED');
    const output = readdirSync(out)
      .filter((f) => f.startsWith('part-'))
      .flatMap((f) =>
        readFileSync(join(out, f), 'utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
    expect(output.sort()).toEqual(
      lines
        .flatMap((l) => l.split(' '))
        .filter((w) => w.length >= 4)
        .map((w) => w.toUpperCase())
        .sort(),
    );
    await cluster.noProcessLeft();
  });

  it("starts a profiled group's TaskExecutor process with slots × the profile's memory as --max-old-space-size", async () => {
    const jobId = await cluster.submit('e2e-profiles.ts', 'unbounded', [], 2);
    // 2 slots × 1500 MiB, on the command line of the one TaskExecutor the job runs on, its profile in its environment.
    const te = await waitFor(
      () => {
        const tes = clusterProcesses(cluster.stateDir).filter((p) => p.resourceId?.startsWith('te-') === true);
        return tes.length === 1 ? tes[0] : undefined;
      },
      'the TaskExecutor process',
      20_000,
    );
    const cmdline = readFileSync(`/proc/${te.pid}/cmdline`, 'utf8').split('\0');
    expect(cmdline).toContain('--max-old-space-size=3000');
    expect(readFileSync(`/proc/${te.pid}/environ`, 'utf8').split('\0')).toContain('FLOE_RESOURCE_PROFILE={"cpu":0.5,"memoryMiB":1500}');
    expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    await cluster.noProcessLeft();
  });

  it('refuses with 400 a profile whose TaskExecutor needs more cores than the machine has, naming the group', async () => {
    // An input that exists: the profile is what is refused.
    writeFileSync(join(cluster.work, 'empty.txt'), '');
    const { jobGraph, library } = await cluster.build(
      'e2e-profiles.ts',
      'default',
      [join(cluster.work, 'empty.txt'), join(cluster.work, 'never'), '64', '1024'],
      2,
    );
    const refused = await cluster.api('POST', '/jobs', { jobGraph, library });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toMatch(
      /slot sharing group 'heavy' asks for \{ cpu: 64, memoryMiB: 1024 \} per slot.*needs 128 vCPUs, and this machine has \d+ cores/,
    );
  });
});
