// Restores of pre-aggregated sliding windows (the slicing window operator) from checkpoints on real
// processes: per-key counts in sliding windows over a deterministic, rate-limited generator, checkpointed
// every 300 ms, survive a kill -9 of a TaskExecutor running the job, struck after a checkpoint with records
// in it completed: the job FINISHES, restored from that checkpoint or a later one, and every window's count
// equals the reference (slices lost would make counts smaller, records read twice larger).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSystemCheckpointStorage } from '../../runtime/checkpoint/file-system-checkpoint-storage.js';
import type { CheckpointMetadata } from '../../runtime/jobmaster/checkpoint-coordinator.js';
import { clusterProcesses } from '../../runtime/local/process-table.js';
import { readOperatorState } from '../../runtime/task/state/operator-state-snapshot.js';
import { waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';
import { expectedWindowCounts } from '../fixtures/jobs/restore-windows.js';

const RECORDS = 4000;
const RATE = 600;
const KEYS = 16;
const SIZE = 2000;
const SLIDE = 500;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('window-restore', {
    'taskmanager.numberOfTaskSlots': 2,
    'heartbeat.interval': 300,
    'heartbeat.timeout': 4_000,
  });
}, 60_000);

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** The id of a completed checkpoint whose source positions show at least 200 records read. */
async function checkpointWithRecords(jobId: string): Promise<number> {
  const folder = join(cluster.stateDir, 'checkpoints', jobId);
  const storage = new FileSystemCheckpointStorage(folder);
  let found = 0;
  await waitFor(
    async () => {
      const ids = existsSync(folder)
        ? readdirSync(folder)
            .filter((f) => /^chk-\d+$/.test(f) && existsSync(join(folder, f, '_metadata')))
            .map((f) => Number(f.slice(4)))
        : [];
      for (const id of ids.sort((a, b) => b - a)) {
        try {
          const metadata = JSON.parse(new TextDecoder().decode(await storage.readMetadata(join(folder, `chk-${id}`)))) as CheckpointMetadata;
          let read = 0;
          for (const s of metadata.subtasks) {
            const state = s.state.operators['numbers'];
            if (state === undefined) continue;
            const splits = (await readOperatorState(state.operator, storage)).get('source-splits') as { next: number; stride: number }[];
            for (const split of splits ?? []) read += Math.floor(split.next / split.stride);
          }
          if (read >= 200) {
            found = id;
            return true;
          }
        } catch {
          // Subsumed while being read: the next look finds a newer one.
        }
      }
      return false;
    },
    'a completed checkpoint with records in it',
    60_000,
  );
  return found;
}

describe('restore of sliding windows from checkpoints', () => {
  it('kill -9 of a TaskExecutor running the job after a checkpoint: FINISHED, restored, every window count exact', async () => {
    let preAggregated = false;
    const jobId = await cluster.submit('restore-windows.ts', 'windowCounts', [RECORDS, RATE, KEYS, SIZE, SLIDE, 300].map(String), 2, (graph) => {
      const window = graph.vertices.flatMap((v) => v.operators).find((o) => o.kind === 'keyed.window');
      preAggregated = window !== undefined && 'preAggregate' in window && window.preAggregate === true;
    });
    expect(preAggregated, 'the windows are pre-aggregated (the slicing operator runs them)').toBe(true);
    const checkpointId = await checkpointWithRecords(jobId);
    const job = (await cluster.api('GET', `/jobs/${jobId}`)).body as { status: string; vertices: { subtasks?: { taskExecutor?: string; state: string }[] }[] };
    expect(job.status).toBe('RUNNING');
    const busy = new Set(job.vertices.flatMap((v) => (v.subtasks ?? []).filter((s) => s.state === 'RUNNING').map((s) => s.taskExecutor)));
    const victim = clusterProcesses(cluster.stateDir).find((p) => p.resourceId !== undefined && busy.has(p.resourceId));
    expect(victim, `a TaskExecutor running the job's tasks (${[...busy].join(', ')})`).toBeDefined();
    process.kill(victim!.pid, 'SIGKILL');

    const done = await cluster.awaitTerminal(jobId, 180_000);
    const history = (await cluster.api('GET', `/jobs/${jobId}/exceptions`)).body.exceptions as { recovered?: boolean; restoredFrom?: number }[];
    expect(done.status, JSON.stringify(history)).toBe('FINISHED');
    const recovered = history.filter((e) => e.recovered === true);
    expect(recovered.length, JSON.stringify(history)).toBeGreaterThanOrEqual(1);
    for (const e of recovered) expect(e.restoredFrom, JSON.stringify(e)).toBeGreaterThanOrEqual(checkpointId);
    const records = (await cluster.api('GET', `/jobs/${jobId}/result`)).body.records as [number, number, number][];
    const counts = new Map(records.map(([key, end, n]) => [`${key} ${end}`, n]));
    expect(counts.size, 'each window of each key emitted once').toBe(records.length);
    expect(counts).toEqual(expectedWindowCounts(RECORDS, KEYS, SIZE, SLIDE));
    await cluster.nothingLeft();
  }, 240_000);
});
