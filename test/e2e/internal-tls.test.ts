// A local cluster with 'security.ssl.internal.enabled': a wordcount across two TaskExecutors finishes with
// exact output (its records cross TLS data connections, its calls HTTPS); while a job runs, its JobMaster's
// and TaskExecutor's RPC ports and its TaskExecutor's data port answer neither plain HTTP/TCP nor a TLS
// peer with a wrong key. With a warm pool, the next job runs on the same TaskExecutors under its own
// TLS identity.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { connect as connectTls } from 'node:tls';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobDataKey } from '../../runtime/core/cluster-keys.js';
import { CLUSTER_TLS_IDENTITY, clusterTlsKey, dataTlsIdentity, dataTlsKey, pskClientOptions } from '../../runtime/core/internal-tls.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { openEmbeddedServices } from '../../runtime/local/embedded-services.js';
import { encodeHello, NONCE_BYTES } from '../../runtime/network/data-auth.js';
import { encodeFrame, FrameType } from '../../runtime/network/frames.js';
import { processesOfCluster, waitFor } from '../support/cluster-processes.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;
const levelBefore = process.env['FLOE_LOG_LEVEL'];

beforeAll(async () => {
  // Info lines name each TaskExecutor's addresses; the cluster's processes inherit the level.
  process.env['FLOE_LOG_LEVEL'] = 'info';
  cluster = await startTestCluster('internal-tls', { 'security.ssl.internal.enabled': 'true' });
});

afterAll(async () => {
  if (levelBefore === undefined) delete process.env['FLOE_LOG_LEVEL'];
  else process.env['FLOE_LOG_LEVEL'] = levelBefore;
  expect(await cluster.close()).toBe(0);
});

/** The addresses each TaskExecutor of a job logged at its start. */
function taskExecutorsOf(on: TestCluster, jobId: string): { address: string; dataAddress: string }[] {
  const dir = join(on.stateDir, 'logs', jobId);
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((file) =>
    readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('{') && line.includes('"TaskExecutor started"'))
      .map((line) => JSON.parse(line) as { address: string; dataAddress: string }),
  );
}

/** How one request ends: an HTTP status, or the connection's error code. */
function request(address: string, tls: ReturnType<typeof pskClientOptions> | undefined): Promise<number | string> {
  return new Promise((resolve) => {
    const url = new URL('/rpc/jobmaster/requestJobStatus', tls === undefined ? address.replace(/^https:/, 'http:') : address);
    const options = { method: 'POST', agent: false, headers: { 'content-type': 'application/json' }, ...tls } as const;
    const req = (tls === undefined ? http : https).request(url, options, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    req.end('[]');
  });
}

/** What a data port sends back to a HELLO for `jobId`, plain or over TLS: bytes received, and how the connection ended. */
function dataHello(
  dataAddress: string,
  jobId: string,
  tls: ReturnType<typeof pskClientOptions> | undefined,
): Promise<{ bytes: number; error: string | undefined }> {
  const i = dataAddress.lastIndexOf(':');
  const target = { host: dataAddress.slice(0, i), port: Number(dataAddress.slice(i + 1)) };
  return new Promise((resolve) => {
    const socket = tls === undefined ? connect(target) : connectTls({ ...target, ...tls });
    let bytes = 0;
    let error: string | undefined;
    // A peer that gets its challenge has got in; it goes no further here.
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      socket.destroy();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => resolve({ bytes, error }));
    socket.write(encodeFrame(FrameType.HELLO, 0, encodeHello(randomBytes(NONCE_BYTES), jobId)));
  });
}

/** Runs a wordcount at parallelism 4 (two TaskExecutors × 2 slots, a hash exchange between them) to FINISHED and checks its counts word for word. */
async function wordcount(on: TestCluster, name: string): Promise<string> {
  const input = join(on.work, 'words.txt');
  const lines = Array.from({ length: 2_000 }, (_, i) => `alpha beta${i % 7} gamma${i % 13}`);
  writeFileSync(input, lines.join('\n') + '\n');
  const out = join(on.work, name);
  const jobId = await on.submit('e2e-wordcount.ts', 'default', [input, out], 4, (graph) => expect(graph.edges.map((e) => e.partitioner)).toEqual(['hash']));
  const job = await on.awaitTerminal(jobId, 120_000);
  expect(job.status, await on.exceptions(jobId)).toBe('FINISHED');

  const expected = new Map<string, number>([['alpha', 2_000]]);
  for (let i = 0; i < 2_000; i++) {
    expected.set(`beta${i % 7}`, (expected.get(`beta${i % 7}`) ?? 0) + 1);
    expected.set(`gamma${i % 13}`, (expected.get(`gamma${i % 13}`) ?? 0) + 1);
  }
  const counts = new Map<string, number>();
  for (const part of readdirSync(out).filter((f) => f.startsWith('part-'))) {
    for (const line of readFileSync(join(out, part), 'utf8')
      .split('\n')
      .filter((l) => l !== '')) {
      const [word, count] = JSON.parse(line) as [string, number];
      expect(counts.has(word), `${word} in two part files`).toBe(false);
      counts.set(word, count);
    }
  }
  expect(counts).toEqual(expected);
  return jobId;
}

describe('internal TLS on a local cluster', () => {
  it('runs a wordcount across two TaskExecutors to FINISHED with exact output', async () => {
    const jobId = await wordcount(cluster, 'counts');
    // Four subtasks at two slots each: two TaskExecutors, each of which served the other over TLS.
    const tes = taskExecutorsOf(cluster, jobId);
    expect(tes).toHaveLength(2);
    for (const te of tes) expect(te.address).toMatch(/^https:\/\//);
    await cluster.noProcessLeft();
  }, 180_000);

  it('while a job runs, its RPC and data ports refuse plain connections and TLS peers with a wrong key', async () => {
    const secret = cluster.dispatcher.secret;
    const jobId = await cluster.submit('e2e-slow.ts', 'default', [join(cluster.work, 'slow-out')], 2);
    try {
      await waitFor(async () => (await cluster.api('GET', `/jobs/${jobId}`)).body.tasks?.running > 0, 'the job to run', 60_000);
      const te = await waitFor(() => taskExecutorsOf(cluster, jobId)[0], "the job's TaskExecutor to start", 60_000);
      const services = openEmbeddedServices(cluster.stateDir);
      const jm = (await services.leaseStore.get(leaseNames.jobMaster(jobId)))!.address;
      await services.close();
      expect(jm).toMatch(/^https:\/\//);

      const wrongKey = pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey('another-cluster-secret'));
      // The cluster's key gets through the handshake to the call's own check (no bearer: 401): the
      // refusals below are the handshake's.
      expect(await request(jm, pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey(secret)))).toBe(401);
      for (const address of [jm, te.address]) {
        expect(await request(address, undefined), `plain HTTP to ${address}`).toBe('ECONNRESET');
        expect(await request(address, wrongKey), `a wrong key at ${address}`).toBe('EPROTO');
      }

      const dataKey = jobDataKey(secret, jobId);
      expect(
        (await dataHello(te.dataAddress, jobId, pskClientOptions(dataTlsIdentity(jobId), dataTlsKey(dataKey)))).bytes,
        'the job key is answered with a challenge',
      ).toBeGreaterThan(0);
      expect(await dataHello(te.dataAddress, jobId, undefined)).toMatchObject({ bytes: 0 });
      expect(await dataHello(te.dataAddress, jobId, pskClientOptions(dataTlsIdentity(jobId), dataTlsKey(jobDataKey('another-cluster-secret', jobId))))).toEqual(
        { bytes: 0, error: 'EPROTO' },
      );
      expect((await cluster.api('GET', `/jobs/${jobId}`)).body.status).toBe('RUNNING');
    } finally {
      await cluster.api('PATCH', `/jobs/${jobId}?mode=cancel`);
    }
    expect((await cluster.awaitTerminal(jobId)).status).toBe('CANCELED');
    await cluster.noProcessLeft();
  }, 180_000);
});

describe('internal TLS with a warm pool', () => {
  let warm: TestCluster;
  beforeAll(async () => {
    warm = await startTestCluster('internal-tls-warm', {
      'security.ssl.internal.enabled': 'true',
      'cluster.warm-pool.jobmanagers': 1,
      'cluster.warm-pool.taskmanagers': 2,
      'cluster.warm-pool.idle-timeout': 3_000,
    });
  });
  afterAll(async () => {
    expect(await warm.close()).toBe(0);
  });

  it("runs the next job on the last job's TaskExecutors, which take the new job's TLS identity", async () => {
    const first = await wordcount(warm, 'first');
    expect(taskExecutorsOf(warm, first)).toHaveLength(2);
    const second = await wordcount(warm, 'second');
    // No TaskExecutor started for the second job: both came from the pool, handed to it with its keys.
    expect(taskExecutorsOf(warm, second)).toEqual([]);
    await waitFor(() => processesOfCluster(warm.stateDir).length === 0, 'the warm pool to go idle and exit', 30_000);
  }, 240_000);
});
