// A redundant TaskExecutor ('slotmanager.redundant-taskmanager-num'), with real processes: the
// ResourceManager keeps one TaskExecutor more than the job's slots need, registered and idle; a kill -9 of
// the one running the job's tasks moves them to the spare, which was running before the kill, restored from
// a checkpoint, and the job FINISHES with every count exact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { expectedCounts } from '../fixtures/jobs/restore-counts.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

const RECORDS = 4000;
const RATE = 500;
const KEYS = 8;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('redundant-taskmanager', {
    'taskmanager.numberOfTaskSlots': 2,
    'slotmanager.redundant-taskmanager-num': 1,
    'resourcemanager.taskmanager-timeout': 1_000,
  });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

type Job = { status: string; vertices?: { subtasks?: { taskExecutor?: string; state: string }[] }[] };
type Exception = { recovered?: boolean; restoredFrom?: number };

const runningOn = (job: Job): Set<string | undefined> =>
  new Set((job.vertices ?? []).flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
const taskExecutors = () => clusterProcesses(cluster.stateDir).filter((p) => p.resourceId?.startsWith('te-') === true);

describe('a redundant TaskExecutor', () => {
  it('is kept idle beside the one running the job, past the idle timeout, and takes over its tasks after a kill -9', async () => {
    const jobId = await cluster.submit('restore-counts.ts', 'countPerKey', [String(RECORDS), String(RATE), String(KEYS), '300'], 2);
    const job = async (): Promise<Job> => (await cluster.api('GET', `/jobs/${jobId}`)).body as Job;
    let busy = new Set<string | undefined>();
    await waitFor(
      async () => {
        const j = await job();
        busy = runningOn(j);
        return (
          j.status === 'RUNNING' &&
          busy.size === 1 &&
          taskExecutors().length === 2 &&
          (await cluster.api('GET', `/jobs/${jobId}/checkpoints`)).body.counts.completed >= 2
        );
      },
      'the job running on one TaskExecutor, another beside it, and 2 checkpoints',
      60_000,
    );
    // Twice the idle timeout: the spare is still there.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const before = taskExecutors();
    expect(before).toHaveLength(2);
    const victim = before.find((p) => busy.has(p.resourceId))!;
    const spare = before.find((p) => p !== victim)!;
    expect(victim, `a TaskExecutor running the job (${[...busy].join(', ')})`).toBeDefined();
    expect((await job()).status, 'the job still runs: the kill strikes while it works').toBe('RUNNING');
    process.kill(victim.pid, 'SIGKILL');

    // The tasks run again on the spare.
    await waitFor(
      async () => {
        const j = await job();
        const on = runningOn(j);
        return j.status === 'RUNNING' && on.size === 1 && on.has(spare.resourceId);
      },
      'the tasks running on the spare',
      60_000,
    );
    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as Exception[];
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    const records = (await cluster.api('GET', `/jobs/${jobId}/result`)).body.records as [number, number, number][];
    expect(new Map(records.map(([k, n]) => [k, n]))).toEqual(expectedCounts(RECORDS, KEYS));
    expect(history.filter((e) => e.recovered === true && (e.restoredFrom ?? 0) >= 1).length, JSON.stringify(history)).toBeGreaterThanOrEqual(1);
    await cluster.nothingLeft();
  }, 240_000);
});
