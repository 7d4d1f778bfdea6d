// RPC over TLS with pre-shared keys ('security.ssl.internal.enabled'): the whole RPC contract holds over
// it, a plain HTTP request and a TLS peer with a key the server does not accept are disconnected in the
// handshake, and a TaskExecutor's endpoint takes only its own identity for the job it serves now.
import http from 'node:http';
import https from 'node:https';
import { connect, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { taskExecutorKey } from '../../runtime/core/cluster-keys.js';
import { RpcUnauthorizedError } from '../../runtime/core/errors.js';
import { JobId, ResourceId } from '../../runtime/core/ids.js';
import {
  CLUSTER_TLS_IDENTITY,
  clusterTlsKey,
  pskClientOptions,
  pskServerOptions,
  taskExecutorTlsIdentity,
  taskExecutorTlsKey,
} from '../../runtime/core/internal-tls.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { HttpRpcService, type HttpRpcServiceOptions } from '../../runtime/rpc/http-rpc-service.js';
import { TEST_METHODS, TestEndpoint, describeRpcServiceContract, type TestGateway } from './rpc-service-contract.js';
import { closedAfterEach, httpRpcTransport } from '../support/http-rpc.js';

const SECRET = 'tls-test-secret-0123456789';
const JOB = 'job-a';

function start(options: Partial<HttpRpcServiceOptions> = {}): Promise<HttpRpcService> {
  return HttpRpcService.start({ secret: SECRET, timeoutMs: 10_000, logger: silentLogger, tls: true, ...options } as HttpRpcServiceOptions);
}

describeRpcServiceContract('https with pre-shared keys', httpRpcTransport(start, 'https'));

type Outcome = { status: number; body: string } | { error: string };

/** One request on a connection of its own, plain or TLS, carrying the cluster secret as its bearer. */
function post(address: string, tls: https.RequestOptions | undefined, bearer = SECRET): Promise<Outcome> {
  return new Promise((resolve) => {
    const url = new URL('/rpc/test/add', address.replace(/^https:/, tls === undefined ? 'http:' : 'https:'));
    const options = { method: 'POST', agent: false, headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` }, ...tls } as const;
    const req = (tls === undefined ? http : https).request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end('[1,2]');
  });
}

describe('HttpRpcService with internal TLS', () => {
  const track = closedAfterEach<HttpRpcService>();

  it('names itself by an https:// address and answers a peer that proves the cluster key', async () => {
    const server = await track(start());
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    expect(server.address).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await post(server.address, pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey(SECRET)))).toEqual({ status: 200, body: '{"ok":true,"value":3}' });
    expect(endpoint.calls).toBe(1);
  });

  it('disconnects a plain HTTP request, even one carrying the secret, without an answer and without running the call', async () => {
    const server = await track(start());
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    const outcome = await post(server.address, undefined);
    expect(outcome).toEqual({ error: 'ECONNRESET' });
    expect(endpoint.calls).toBe(0);
  });

  it('refuses in the handshake a TLS peer with a wrong key or an identity it does not know', async () => {
    const server = await track(start());
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    const wrong = [
      pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey('another-cluster-secret')),
      pskClientOptions(CLUSTER_TLS_IDENTITY, Buffer.from(SECRET)),
      pskClientOptions('nobody', clusterTlsKey(SECRET)),
      // A TaskExecutor identity with the key of another TaskExecutor.
      pskClientOptions(taskExecutorTlsIdentity('te-a', JOB), taskExecutorTlsKey(taskExecutorKey(SECRET, JOB, 'te-b'))),
    ];
    for (const tls of wrong) expect(await post(server.address, tls)).toEqual({ error: 'EPROTO' });
    expect(endpoint.calls).toBe(0);
    // Another cluster's service is refused the same way, and says why.
    const intruder = await track(start({ secret: 'another-cluster-secret' }));
    await expect(intruder.connect<TestGateway>(server.address, 'test').add(1, 2)).rejects.toThrow(RpcUnauthorizedError);
    await expect(intruder.connect<TestGateway>(server.address, 'test').add(1, 2)).rejects.toThrow(
      /TLS handshake .* failed .*'security\.ssl\.internal\.enabled' true on both/,
    );
    expect(endpoint.calls).toBe(0);
  });

  it('disconnects a peer that connects and never starts the TLS handshake, within 10 s', async () => {
    const server = await track(start());
    const { port } = new URL(server.address);
    const started = Date.now();
    const socket = connect({ host: '127.0.0.1', port: Number(port) });
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
    expect(received).toBe(0);
  }, 20_000);

  it('still checks the bearer inside the TLS connection', async () => {
    const server = await track(start());
    const endpoint = new TestEndpoint();
    server.serve('test', endpoint, { methods: TEST_METHODS });
    const outcome = await post(server.address, pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey(SECRET)), 'not-the-secret');
    expect(outcome).toMatchObject({ status: 401 });
    expect(endpoint.calls).toBe(0);
  });

  it('a TaskExecutor and a holder of the secret call each other; the TaskExecutor takes only its own identity for its current job', async () => {
    const cluster = await track(start());
    cluster.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    const te = await track(
      start({
        secret: undefined,
        taskExecutor: { resourceId: 'te-a', jobId: JOB, key: taskExecutorKey(SECRET, JOB, 'te-a') },
      } as Partial<HttpRpcServiceOptions>),
    );
    const teEndpoint = new TestEndpoint();
    te.serve('test', teEndpoint, { methods: TEST_METHODS });
    const teAt = (job: string): { taskExecutor: { resourceId: ResourceId; jobId: JobId } } => ({
      taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(job) },
    });

    expect(await cluster.connect<TestGateway>(te.address, 'test', teAt(JOB)).add(2, 3)).toBe(5);
    const forTaskExecutors = new TestEndpoint();
    cluster.serve('te-facing', forTaskExecutors, { methods: TEST_METHODS, taskExecutorJob: JobId.of(JOB), taskExecutorCalls: { add: () => true } });
    expect(await te.connect<TestGateway>(cluster.address, 'te-facing').add(4, 5)).toBe(9);
    expect(forTaskExecutors.calls).toBe(1);
    // The cluster's own identity is no key at a TaskExecutor, nor is another TaskExecutor's.
    expect(await post(te.address, pskClientOptions(CLUSTER_TLS_IDENTITY, clusterTlsKey(SECRET)))).toEqual({ error: 'EPROTO' });
    expect(await post(te.address, pskClientOptions(taskExecutorTlsIdentity('te-b', JOB), taskExecutorTlsKey(taskExecutorKey(SECRET, JOB, 'te-b'))))).toEqual({
      error: 'EPROTO',
    });
    expect(teEndpoint.calls).toBe(1);

    // Handed to another job, the TaskExecutor takes that job's identity and no longer the old one.
    te.switchTaskExecutorJob('job-b', taskExecutorKey(SECRET, 'job-b', 'te-a'));
    expect(await cluster.connect<TestGateway>(te.address, 'test', teAt('job-b')).add(1, 1)).toBe(2);
    expect(await post(te.address, pskClientOptions(taskExecutorTlsIdentity('te-a', JOB), taskExecutorTlsKey(taskExecutorKey(SECRET, JOB, 'te-a'))))).toEqual({
      error: 'EPROTO',
    });
    expect(teEndpoint.calls).toBe(2);
  });

  it('never carries a call on a connection proven with another identity, and proves the key on every new connection', async () => {
    // A server that records the identity each TLS handshake proved and answers every call with null.
    const handshakes: string[] = [];
    const keyOf = (identity: string): Buffer | undefined => {
      const te = ['job-a', 'job-b'].find((job) => identity === taskExecutorTlsIdentity('te-a', job));
      return te !== undefined ? taskExecutorTlsKey(taskExecutorKey(SECRET, te, 'te-a')) : undefined;
    };
    const server = https.createServer(
      { ...pskServerOptions(keyOf, (_socket, identity) => handshakes.push(identity)), keepAliveTimeout: 30_000 },
      (req, res) => {
        req.resume();
        req.on('end', () => res.end('{"ok":true,"value":null}'));
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const address = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
      // Idle connections go after 50 ms, so the last call below opens a new one through the pool.
      const caller = await track(start({ idleSocketTimeoutMs: 50 }));
      const at = (job: string): TestGateway =>
        caller.connect<TestGateway>(address, 'test', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of(job) } });
      await at('job-a').nothing();
      await at('job-a').nothing();
      await at('job-b').nothing();
      await at('job-a').nothing();
      // One kept connection per identity: the call for job-b opened its own.
      expect(handshakes).toEqual([taskExecutorTlsIdentity('te-a', 'job-a'), taskExecutorTlsIdentity('te-a', 'job-b')]);
      const deadline = Date.now() + 5_000;
      while ((await new Promise<number>((r) => server.getConnections((_e, n) => r(n)))) > 0) {
        if (Date.now() > deadline) throw new Error('the caller kept its idle connections past 5 s');
        await new Promise((r) => setTimeout(r, 20));
      }
      // A new connection runs the full handshake: a resumed session would skip the server's key check.
      await at('job-a').nothing();
      expect(handshakes).toEqual([
        taskExecutorTlsIdentity('te-a', 'job-a'),
        taskExecutorTlsIdentity('te-a', 'job-b'),
        taskExecutorTlsIdentity('te-a', 'job-a'),
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('fails a call whose TLS identity would not fit a handshake, saying so, as a rejection', async () => {
    const client = await track(start());
    const call = client
      .connect<TestGateway>(client.address, 'test', { taskExecutor: { resourceId: ResourceId.of('te-a'), jobId: JobId.of('j'.repeat(200)) } })
      .add(1, 2);
    await expect(call).rejects.toThrow(/TLS identity of TaskExecutor te-a of job j+ takes \d+ bytes, more than the 256 a TLS handshake carries/);
  });

  it('refuses to call a plain http:// address, saying every process needs the same setting', async () => {
    const client = await track(start());
    const plain = await track(start({ tls: false }));
    plain.serve('test', new TestEndpoint(), { methods: TEST_METHODS });
    await expect(client.connect<TestGateway>(plain.address, 'test').add(1, 2)).rejects.toThrow(
      /'security\.ssl\.internal\.enabled' true this process reaches only https:\/\/ addresses, found http:/,
    );
  });
});
