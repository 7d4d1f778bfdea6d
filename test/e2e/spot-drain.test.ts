// A TaskExecutor sent SIGTERM while it runs a job's tasks (a Spot interruption, a scale-in) drains: its
// tasks move to another TaskExecutor without counting against the restart strategy, the job FINISHES
// word for word, and the TaskExecutor exits by itself once nothing of it is needed. The cluster allows
// no restart at all ('restart-strategy.type: none'): any counted failure would fail the job.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { waitFor } from '../support/cluster-processes.js';
import { readCounts, writeCorpus } from '../support/corpus.js';
import { isProcessAlive } from '../support/process-liveness.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;
let input: string;
let expected: Map<string, number>;

const logLevel = process.env['FLOE_LOG_LEVEL'];

beforeAll(async () => {
  // The TaskExecutor says at info why it exits; its process inherits this.
  process.env['FLOE_LOG_LEVEL'] = 'info';
  cluster = await startTestCluster('e2e-spot-drain', { 'restart-strategy.type': 'none', 'heartbeat.interval': 300, 'heartbeat.timeout': 4_000 });
  input = join(cluster.work, 'corpus.txt');
  expected = await writeCorpus(input, 4 * 1024 * 1024, 11);
}, 60_000);

afterAll(async () => {
  if (logLevel === undefined) delete process.env['FLOE_LOG_LEVEL'];
  else process.env['FLOE_LOG_LEVEL'] = logLevel;
  expect(await cluster.close()).toBe(0);
});

interface TaskView {
  readonly name: string;
  readonly state: string;
}
interface TaskExecutorView {
  readonly resourceId: string;
  readonly jobId: string;
  readonly slots: readonly { readonly tasks: readonly TaskView[] }[];
}

/** Files under `dir` named `name`, at any depth. */
function findFiles(dir: string, name: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...findFiles(path, name));
    else if (entry === name) out.push(path);
  }
  return out;
}

describe('a TaskExecutor sent SIGTERM mid-job', () => {
  it("drains: the job FINISHES exact with 0 restarts, the loss named as the platform's, and the TaskExecutor exits by itself", async () => {
    const out = join(cluster.work, 'counts');
    // Slow per word: the tasks run for many seconds, so the signal lands while they do.
    const jobId = await cluster.submit('e2e-slow-wordcount.ts', 'default', [input, out, '400'], 2);
    const busy = await waitFor(
      async () => {
        const job = (await cluster.api('GET', `/jobs/${jobId}`)).body;
        if (['FINISHED', 'FAILED', 'CANCELED'].includes(job.status))
          throw new Error(`the job ended ${job.status} before any TaskExecutor was seen running its tasks: ${await cluster.exceptions(jobId)}`);
        const { body } = await cluster.api('GET', '/taskmanagers');
        const views = (body.taskManagers ?? []) as TaskExecutorView[];
        return views.find((te) => te.jobId === jobId && te.slots.some((s) => s.tasks.some((t) => t.state === 'RUNNING')));
      },
      'a TaskExecutor running tasks of the job',
      60_000,
    );
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId === busy.resourceId);
    expect(victim, `no process for ${busy.resourceId}`).toBeDefined();
    const before = (await cluster.api('GET', `/jobs/${jobId}`)).body;
    expect(before.status).toBe('RUNNING');

    process.kill(victim!.pid, 'SIGTERM');

    const job = await cluster.awaitTerminal(jobId, 240_000);
    const { exceptions } = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body as {
      exceptions: { message: string; recovered?: boolean; platformCaused?: boolean; location?: string }[];
    };
    expect(job.status, JSON.stringify(exceptions)).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    expect(job.restarts ?? 0).toBe(before.restarts ?? 0);
    // The move is in the history, named as a loss the platform caused, and it is the only entry.
    expect(exceptions.length, JSON.stringify(exceptions)).toBe(1);
    expect(exceptions[0]).toMatchObject({ recovered: true, platformCaused: true, location: busy.resourceId });
    expect(exceptions[0]!.message).toContain(`TaskExecutor ${busy.resourceId} is leaving (SIGTERM)`);
    // It went by itself after draining, not at the drain deadline and not by a kill.
    await waitFor(() => !isProcessAlive(victim!.pid), 'the drained TaskExecutor to exit', 30_000);
    const [log] = findFiles(cluster.stateDir, `${busy.resourceId}.log`);
    expect(log, `no log of ${busy.resourceId}`).toBeDefined();
    expect(readFileSync(log!, 'utf8')).toContain('left: SIGTERM');
    await cluster.nothingLeft();
  }, 300_000);

  it('keeps serving the partitions its moved tasks read; a second SIGTERM ends it at once, and the job still FINISHES exact with 0 restarts', async () => {
    const out = join(cluster.work, 'counts-twice');
    // Blocking exchange: the count tasks read the words region's finished partitions, 2 ms per word.
    const jobId = await cluster.submit('e2e-jm-failover.ts', 'default', [input, out, '2'], 2);
    const busy = await waitFor(
      async () => {
        const job = (await cluster.api('GET', `/jobs/${jobId}`)).body;
        if (['FINISHED', 'FAILED', 'CANCELED'].includes(job.status))
          throw new Error(`the job ended ${job.status} before a TaskExecutor was seen counting: ${await cluster.exceptions(jobId)}`);
        const views = ((await cluster.api('GET', '/taskmanagers')).body.taskManagers ?? []) as TaskExecutorView[];
        return views.find((te) => te.jobId === jobId && te.slots.some((s) => s.tasks.some((t) => t.name.includes('count') && t.state === 'RUNNING')));
      },
      'a TaskExecutor running the count tasks',
      60_000,
    );
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId === busy.resourceId)!;
    expect(victim).toBeDefined();
    const exceptions = async () =>
      ((await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body as { exceptions: { platformCaused?: boolean; recovered?: boolean; location?: string }[] })
        .exceptions;

    process.kill(victim.pid, 'SIGTERM');
    await waitFor(async () => (await exceptions()).some((e) => e.location === busy.resourceId), 'the JobMaster to move its tasks', 30_000);
    // Its tasks left, yet it stays: the moved count tasks read its partitions.
    expect(isProcessAlive(victim.pid)).toBe(true);
    const secondAt = Date.now();
    process.kill(victim.pid, 'SIGTERM');
    await waitFor(() => !isProcessAlive(victim.pid), 'the TaskExecutor to stop on the second SIGTERM', 10_000);
    expect(Date.now() - secondAt).toBeLessThan(8_000);

    const job = await cluster.awaitTerminal(jobId, 240_000);
    const all = await exceptions();
    expect(job.status, JSON.stringify(all)).toBe('FINISHED');
    expect(readCounts(out)).toEqual(expected);
    expect(job.restarts ?? 0).toBe(0);
    // Every failure it caused, its leaving and the partitions gone with it, is the platform's.
    expect(all.length, JSON.stringify(all)).toBeGreaterThanOrEqual(1);
    expect(
      all.every((e) => e.platformCaused === true && e.recovered === true),
      JSON.stringify(all),
    ).toBe(true);
    await cluster.nothingLeft();
  }, 300_000);
});
