// Checkpoints under backpressure on real processes: a fast keyed count at p = 2 feeds a map that sleeps per
// record at p = 1, with checkpoints every 500 ms (timeout 5 s), unaligned checkpoints on and an aligned-
// checkpoint timeout of 100 ms. Checkpoints complete unaligned, one after the other (their barriers overtake
// the queued buffers, which go into the checkpoint; once the sources finished, the tasks after them are
// triggered and take what their channels still bring as in-flight data), and after a kill -9 of a
// TaskExecutor running the job it restores from such a checkpoint — records in flight included — and its
// output equals the reference.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { expectedTotals } from '../fixtures/jobs/slow-sink.js';

const RECORDS = 4000;
const KEYS = 8;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('unaligned-checkpoints', {
    'taskmanager.numberOfTaskSlots': 2,
    // Small buffers: a producer waiting for room downstream gets it after a few slow records, not thousands.
    'taskmanager.memory.segment-size': 1024,
    'heartbeat.interval': 300,
    'heartbeat.timeout': 4_000,
    'high-availability.lease.duration': 3_000,
    'high-availability.lease.renew-interval': 500,
    'dispatcher.reconcile-interval': 250,
  });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

interface CheckpointJson {
  readonly id: number;
  readonly status: string;
  readonly checkpoint_type: string;
}

describe('unaligned checkpoints under backpressure', () => {
  it('complete unaligned, three in a row, while a slow sink backpressures the job; after kill -9 of a TaskExecutor the job restores one and its output is exact', async () => {
    const jobId = await cluster.submit('slow-sink.ts', 'slowSink', [String(RECORDS), '2', String(KEYS), '500', 'unaligned', '100'], 2);
    let unaligned = 0;
    let seen: unknown;
    await waitFor(
      async () => {
        const { body } = await cluster.api('GET', `/jobs/${jobId}/checkpoints`);
        seen = body;
        const done = new Set(
          ((body as { history?: CheckpointJson[] }).history ?? [])
            .filter((c) => c.status === 'COMPLETED' && c.checkpoint_type === 'UNALIGNED_CHECKPOINT')
            .map((c) => c.id),
        );
        // The newest of three consecutive checkpoints that all completed unaligned.
        unaligned = Math.max(0, ...[...done].filter((id) => done.has(id - 1) && done.has(id - 2)));
        return unaligned > 0;
      },
      'three consecutive checkpoints completed unaligned',
      60_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}; the job's checkpoints: ${JSON.stringify(seen)}`);
    });
    const job = (await cluster.api('GET', `/jobs/${jobId}`)).body as { status: string; vertices: { subtasks?: { taskExecutor?: string; state: string }[] }[] };
    expect(job.status).toBe('RUNNING');
    const busy = new Set(job.vertices.flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId !== undefined && busy.has(p.resourceId));
    expect(victim, `a TaskExecutor running the job's tasks (${[...busy].join(', ')})`).toBeDefined();
    process.kill(victim!.pid, 'SIGKILL');

    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { recovered?: boolean; restoredFrom?: number }[];
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    const { body } = await cluster.api('GET', `/jobs/${jobId}/result`);
    const totals = (body.records as [number, number, number][]).sort((a, b) => a[0] - b[0]);
    expect(totals).toEqual(expectedTotals(RECORDS, KEYS));
    const recovered = history.filter((e) => e.recovered === true);
    expect(recovered.length, JSON.stringify(history)).toBeGreaterThanOrEqual(1);
    for (const e of recovered) expect(e.restoredFrom, JSON.stringify(e)).toBeGreaterThanOrEqual(unaligned);
    await cluster.nothingLeft();
  }, 240_000);
});
