// Operating unbounded jobs on real processes: while they run, GET /jobs/:id and `floe status` show per
// vertex records/s, busy / idle / back-pressured time and the watermark; a slow sink back-pressures its
// upstream vertex, a slow source is idle; a failed task's restart says its state restarted empty.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../runtime/cli/main.js';
import type { VertexDetails } from '../../runtime/protocol/rest-api.js';
import { waitFor } from '../support/cluster-processes.js';
import { FIXTURE_JOBS, startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startTestCluster('e2e-streaming-metrics', { 'heartbeat.interval': 300 });
});

afterAll(async () => {
  expect(await cluster.close()).toBe(0);
});

/** The job's vertices once `check` holds of them; the last ones seen in the error otherwise. */
async function verticesWhen(jobId: string, what: string, check: (vertices: readonly VertexDetails[]) => boolean): Promise<readonly VertexDetails[]> {
  let last: unknown;
  try {
    return await waitFor(
      async () => {
        const { body } = await cluster.api('GET', `/jobs/${jobId}`);
        last = body.vertices;
        return body.status === 'RUNNING' && Array.isArray(body.vertices) && check(body.vertices) ? (body.vertices as VertexDetails[]) : undefined;
      },
      what,
      90_000,
      250,
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; last seen: ${JSON.stringify(last)}`);
  }
}

/** The test's Dispatcher is not the state dir's registered cluster: the CLI names it by its URL, with its secret. */
const clusterEnv = () => ({ FLOE_URL: cluster.dispatcher.url, FLOE_SECRET: cluster.dispatcher.secret });

async function floe(...argv: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const io: CliIo = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: () => true },
    env: clusterEnv(),
    cwd: cluster.work,
    pollIntervalMs: 10,
  };
  const code = await main([...argv], io);
  return { code, stdout };
}

async function cancel(jobId: string): Promise<void> {
  expect((await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`)).status).toBe(202);
  expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
}

describe('a running streaming job, per vertex', () => {
  it('shows the upstream vertex back-pressured and the slow sink busy, in REST and in floe status', async () => {
    const jobId = await cluster.submit('streaming-metrics.ts', 'slowSink', [], 1);
    const [source, sink] = await verticesWhen(
      jobId,
      'the source back-pressured and the sink busy over half of each second',
      ([s, k]) => (s?.backPressuredTimeMsPerSecond ?? 0) > 500 && (k?.busyTimeMsPerSecond ?? 0) > 500,
    );
    // The source waits on the sink's credit; the sink works (its map sleeps) and has input waiting.
    expect(source!.backPressuredTimeMsPerSecond).toBeGreaterThan(source!.busyTimeMsPerSecond!);
    expect(sink!.busyTimeMsPerSecond).toBeGreaterThan(sink!.idleTimeMsPerSecond! + sink!.backPressuredTimeMsPerSecond!);
    expect(sink!.recordsInPerSecond).toBeGreaterThan(0);
    expect(source!.recordsOutPerSecond).toBeGreaterThan(0);
    // No watermark strategy: no watermark, said so explicitly (JSON has no -Infinity).
    expect(sink!.watermark).toBe('-Infinity');
    expect(source!.subtasks![0]!.metrics).toEqual(expect.objectContaining({ backPressuredTimeMsPerSecond: expect.any(Number), watermark: '-Infinity' }));

    // Flink's vertex metrics endpoint: the ids there are, then values (strings) of those asked for.
    const metrics = (query: string) => cluster.api('GET', `/jobs/${jobId}/vertices/${source!.id}/metrics${query}`);
    const listed = (await metrics('')).body as { id: string }[];
    expect(listed.map((m) => m.id)).toEqual(
      expect.arrayContaining([
        'numRecordsOutPerSecond',
        'busyTimeMsPerSecond',
        'backPressuredTimeMsPerSecond',
        'currentInputWatermark',
        '0.busyTimeMsPerSecond',
      ]),
    );
    const asked = (await metrics('?get=backPressuredTimeMsPerSecond,currentInputWatermark,noSuchMetric')).body as { id: string; value: string }[];
    expect(asked.map((m) => m.id)).toEqual(['backPressuredTimeMsPerSecond', 'currentInputWatermark']);
    expect(Number(asked[0]!.value)).toBeGreaterThanOrEqual(0);
    expect(asked[1]!.value).toBe('-Infinity');
    expect((await cluster.api('GET', `/jobs/${jobId}/vertices/no-such-vertex/metrics`)).status).toBe(404);

    const text = await floe('status', jobId);
    expect(text.code).toBe(0);
    const header = text.stdout.split('\n').find((l) => l.startsWith('VERTEX') && l.includes('BACKPRESSURED'));
    expect(header, text.stdout).toBeDefined();
    const columns = header!.split(/\s{2,}/);
    const rows = text.stdout.split('\n').slice(text.stdout.split('\n').indexOf(header!) + 1, text.stdout.split('\n').indexOf(header!) + 3);
    const [sourceRow, sinkRow] = rows.map((r) => Object.fromEntries(r.split(/\s{2,}/).map((cell, i) => [columns[i], cell])));
    expect(parseInt(sourceRow!['BACKPRESSURED']!, 10)).toBeGreaterThan(parseInt(sourceRow!['BUSY']!, 10));
    expect(sinkRow!['IN/S']).toMatch(/\/s$/);
    expect(sinkRow!['WATERMARK']).toBe('none');

    const json = JSON.parse((await floe('status', jobId, '--json')).stdout) as { vertices: VertexDetails[] };
    expect(json.vertices[0]).toEqual(
      expect.objectContaining({
        busyTimeMsPerSecond: expect.any(Number),
        idleTimeMsPerSecond: expect.any(Number),
        backPressuredTimeMsPerSecond: expect.any(Number),
        watermark: '-Infinity',
      }),
    );
    await cancel(jobId);
  }, 120_000);

  it('floe run follows a streaming job with records/s in and out and the watermark, until Ctrl-C cancels it', async () => {
    const handlers = new Set<() => void>();
    let stderr = '';
    let pressed = false;
    const io: CliIo = {
      stdout: { write: () => true },
      stderr: {
        isTTY: true,
        columns: 1_000,
        write: (t: string) => {
          stderr += t;
          // Ctrl-C once the progress line shows the job's rates.
          if (!pressed && /\/s in, [0-9.]+[kM]?\/s out/.test(stderr)) {
            pressed = true;
            for (const h of [...handlers]) h();
          }
        },
      },
      env: clusterEnv(),
      cwd: cluster.work,
      pollIntervalMs: 100,
      interrupts: {
        subscribe: (h) => {
          handlers.add(h);
          return () => handlers.delete(h);
        },
      },
      // Asked whether to cancel the job or detach: cancel.
      prompt: { interactive: true, ask: () => Promise.resolve('c') },
    };
    const code = await main(['run', join(FIXTURE_JOBS, 'streaming-metrics.ts'), '--export', 'idleSource', '-p', '1', '--no-typecheck'], io);
    expect(pressed, stderr).toBe(true);
    expect(code, stderr).toBe(130);
    expect(stderr).toMatch(/RUNNING · tasks [^·]+ · records \d+ in, \d+ out · [0-9.]+\/s in, [0-9.]+\/s out · watermark none · /);
    expect(stderr).toMatch(/CANCELED/);
  }, 120_000);

  it('shows a slow source idle most of each second', async () => {
    const jobId = await cluster.submit('streaming-metrics.ts', 'idleSource', [], 1);
    const [source] = await verticesWhen(jobId, 'the source idle over half of each second', ([s]) => (s?.idleTimeMsPerSecond ?? 0) > 500);
    expect(source!.idleTimeMsPerSecond).toBeGreaterThan(source!.busyTimeMsPerSecond! + source!.backPressuredTimeMsPerSecond!);
    await cancel(jobId);
  }, 120_000);

  it('says in the exception history that a restarted task of a streaming job began with empty state', async () => {
    const jobId = await cluster.submit('streaming-metrics.ts', 'failOnce', [join(cluster.work, 'failed-once')], 1);
    const exceptions = await waitFor(
      async () => {
        const { body } = await cluster.api('GET', `/jobs/${jobId}/exceptions`);
        return body.exceptions.length > 0 ? body.exceptions : undefined;
      },
      'the failure in the exception history',
      60_000,
      200,
    );
    expect(exceptions).toEqual([expect.objectContaining({ message: 'failing on purpose, once', recovered: true, restoredState: 'empty' })]);
    await verticesWhen(jobId, 'the restarted task running', ([v]) => v?.tasks.running === 1);
    expect((await floe('status', jobId)).stdout).toContain('with empty state (no checkpoint to restore)');
    await cancel(jobId);
  }, 120_000);
});
