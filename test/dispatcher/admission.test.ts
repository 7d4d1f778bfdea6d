// The Dispatcher's submission protocol and admission control over in-memory backends: the interleavings
// of racing and failing submissions, jobs waiting in line with their place, started in order as
// JobManagers end, and the cap each JobManager gets.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobKeys, sha256Hex } from '../../runtime/blob/blob-store.js';
import { ManualClock } from '../../runtime/core/clock.js';
import { CONFIG_ENV, configFromEnv, loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { Dispatcher } from '../../runtime/dispatcher/dispatcher.js';
import { jobManagerWorkerId } from '../../runtime/dispatcher/jobmanager-runners.js';
import { createRestRouter } from '../../runtime/dispatcher/rest-router.js';
import { AdmissionState, type JobStore } from '../../runtime/ha/job-store.js';
import { leaseNames, parseStandbyClaim } from '../../runtime/ha/lease-store.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../../runtime/memory/in-process-worker-launcher.js';
import { STANDBY_JOB_MANAGER_METHODS, type StandbyJobManagerGateway } from '../../runtime/protocol/standby-jobmanager-gateway.js';
import { WorkerKind, type WorkerSpec } from '../../runtime/protocol/worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { directFront, fixtureLibrary, graphFor, prepareFixtureLibrary, REST_SECRET, type RestCall } from './rest-contract.js';

beforeAll(prepareFixtureLibrary);

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A BlobStore whose puts can be held or failed, to stand in for a slow or crashing submitter. */
class ControlledBlobStore extends InMemoryBlobStore {
  /** Called before each put; may wait or throw. */
  beforePut: (key: string) => Promise<void> = async () => undefined;
  /** The key of every read, in order. */
  readonly reads: string[] = [];
  override async put(key: string, data: Uint8Array): Promise<void> {
    await this.beforePut(key);
    await super.put(key, data);
  }
  override async get(key: string): Promise<Uint8Array | undefined> {
    this.reads.push(key);
    return super.get(key);
  }
}

interface Cluster {
  readonly call: RestCall;
  readonly jobStore: JobStore;
  readonly blobStore: ControlledBlobStore;
  /** Every JobManager started, in order. */
  readonly started: WorkerSpec[];
  /** Ends a JobManager "process" as if it exited by itself with `code`. */
  exit(jobId: string, code?: number): Promise<void>;
  readonly dispatcher: Dispatcher;
  readonly leaseStore: InMemoryLeaseStore;
  /** The RPC network the Dispatcher calls on. */
  readonly network: LocalRpcNetwork;
  /** The Dispatcher's launcher, and a way to end one of its "processes" by worker id. */
  readonly launcher: InProcessWorkerLauncher;
  exitWorker(workerId: string, code: number): void;
}

async function startCluster(
  options: {
    config?: Record<string, unknown>;
    jobStore?: JobStore;
    blobStore?: ControlledBlobStore;
    leaseStore?: InMemoryLeaseStore;
    clock?: ManualClock;
    failLaunchOf?: (spec: WorkerSpec) => boolean;
    start?: boolean;
    reachesJobManagers?: boolean;
  } = {},
): Promise<Cluster> {
  const clock = options.clock ?? new ManualClock();
  const jobStore = options.jobStore ?? new InMemoryJobStore(clock);
  const blobStore = options.blobStore ?? new ControlledBlobStore();
  const started: WorkerSpec[] = [];
  const exits = new Map<string, (code: number) => void>();
  const launcher = new InProcessWorkerLauncher(async (spec) => {
    if (options.failLaunchOf?.(spec)) throw new Error('no room for another process');
    started.push(spec);
    let exit!: (code: number) => void;
    const exited = new Promise<number>((resolve) => (exit = resolve));
    exits.set(spec.id, exit);
    return { stop: async () => exit(0), exited };
  });
  const network = new LocalRpcNetwork();
  const rpc = new LocalRpcService(network, 'dispatcher');
  const config = loadConfig({ 'taskmanager.numberOfTaskSlots': 2, ...options.config });
  const leaseStore = options.leaseStore ?? new InMemoryLeaseStore(clock);
  const dispatcher = new Dispatcher({
    jobStore,
    blobStore,
    leaseStore,
    launcher,
    rpc,
    config,
    clock,
    logger: silentLogger,
    jobManagerEnv: { FLOE_STATE_DIR: '/nowhere', [CONFIG_ENV]: JSON.stringify(config) },
    ...(options.reachesJobManagers === undefined ? {} : { reachesJobManagers: options.reachesJobManagers }),
  });
  cleanups.push(
    () => dispatcher.close(),
    () => launcher.close(),
    () => rpc.close(),
  );
  if (options.start !== false) await dispatcher.start();
  const front = await directFront(createRestRouter(dispatcher, { secret: REST_SECRET, maxBodyBytes: 10 * 1024 * 1024, logger: silentLogger }));
  return {
    call: front.call,
    jobStore,
    blobStore,
    started,
    dispatcher,
    leaseStore,
    network,
    launcher,
    exitWorker: (workerId, code) => exits.get(workerId)!(code),
    async exit(jobId, code = 0) {
      const before = (await jobStore.admissionLedger()).admitted.length;
      const record = (await jobStore.get(JobId.of(jobId)))!;
      // A JobManager that ends by itself with 0 has ended its job first, as a real one does.
      if (code === 0) await jobStore.update(JobId.of(jobId), { status: 'FINISHED', endedAtMs: clock.now() }, record.epoch);
      exits.get(record.jobManager?.workerId ?? jobManagerWorkerId(jobId))!(code);
      // The exit is handled asynchronously, as a process exit is: wait until the reservation is back.
      for (let i = 0; i < 1000 && (await jobStore.get(JobId.of(jobId)))?.admission?.state === AdmissionState.ADMITTED; i++)
        await new Promise((r) => setTimeout(r, 1));
      expect((await jobStore.admissionLedger()).admitted.length).toBeLessThanOrEqual(before);
    },
  };
}

const body = async (jobId: string, change: (g: JobGraph) => JobGraph = (g) => g) => ({
  jobGraph: change(await graphFor(jobId)),
  library: Buffer.from(fixtureLibrary().library).toString('base64'),
});
const withParallelism =
  (p: number) =>
  (g: JobGraph): JobGraph => ({ ...g, vertices: g.vertices.map((v) => ({ ...v, parallelism: p })) });
const startedJobs = (c: Cluster): string[] => c.started.map((s) => s.env['FLOE_JOB_ID']!);

describe('submission protocol', () => {
  it('of 10 concurrent submissions of one new id with different graphs, one is the job; the others get 409 and write nothing', async () => {
    const c = await startCluster();
    const bodies = await Promise.all(Array.from({ length: 10 }, (_, i) => body('race', (g) => ({ ...g, name: `client-${i}` }))));
    const answers = await Promise.all(bodies.map((b) => c.call('POST', '/jobs', b)));
    expect(answers.map((a) => a.status).sort()).toEqual([202, ...Array(9).fill(409)]);
    const winner = bodies[answers.findIndex((a) => a.status === 202)]!;
    const stored = JSON.parse(Buffer.from((await c.blobStore.get(blobKeys.jobGraph('race')))!).toString('utf8'));
    expect(stored).toEqual(winner.jobGraph);
    expect((await c.jobStore.get(JobId.of('race')))!.name).toBe(winner.jobGraph.name);
    expect(c.started).toHaveLength(1);
  });

  it('a resubmission that finds the first still writing is the same job; it completes the submission, and one JobManager starts', async () => {
    const c = await startCluster();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding = true;
    // The first submitter stalls writing the JobGraph, after its record claimed the id.
    c.blobStore.beforePut = async (key) => {
      if (key === blobKeys.jobGraph('slow') && holding) {
        holding = false;
        await held;
      }
    };
    const b = await body('slow');
    const first = c.call('POST', '/jobs', b);
    await waitUntil(async () => (await c.jobStore.get(JobId.of('slow')))?.admission?.state === AdmissionState.SUBMITTING);
    expect(await c.blobStore.exists(blobKeys.jobGraph('slow'))).toBe(false);

    // Another graph under the id is refused at once and writes nothing.
    const other = await c.call('POST', '/jobs', await body('slow', (g) => ({ ...g, name: 'other' })));
    expect(other.status).toBe(409);
    expect(await c.blobStore.exists(blobKeys.jobGraph('slow'))).toBe(false);

    // The same graph is the same job: its request stores what the first has not yet and starts it.
    expect(await c.call('POST', '/jobs', b)).toEqual({ status: 202, body: { jobId: 'slow', existing: true } });
    expect(startedJobs(c)).toEqual(['slow']);
    release();
    expect(await first).toEqual({ status: 202, body: { jobId: 'slow' } });
    expect(startedJobs(c)).toEqual(['slow']);
    expect((await c.jobStore.get(JobId.of('slow')))!.admission?.state).toBe(AdmissionState.ADMITTED);
  });

  it('a submitter that fails after its record claimed the id leaves it SUBMITTING; the same request again completes it', async () => {
    const c = await startCluster();
    c.blobStore.beforePut = async (key) => {
      if (key === blobKeys.jobGraph('crash')) throw new Error('disk full');
    };
    const b = await body('crash');
    const failed = await c.call('POST', '/jobs', b);
    expect(failed.status).toBe(500);
    const record = (await c.jobStore.get(JobId.of('crash')))!;
    expect(record).toMatchObject({ status: 'INITIALIZING', admission: { state: AdmissionState.SUBMITTING } });
    expect(await c.jobStore.admissionLedger()).toEqual({ waiting: [], admitted: [] });
    expect(c.started).toEqual([]);
    // Nothing was rolled back: the library it stored stays, and another graph still may not take the id.
    expect(await c.blobStore.exists(blobKeys.library(fixtureLibrary().sha256))).toBe(true);
    expect((await c.call('POST', '/jobs', await body('crash', (g) => ({ ...g, name: 'other' })))).status).toBe(409);

    c.blobStore.beforePut = async () => undefined;
    expect(await c.call('POST', '/jobs', b)).toEqual({ status: 202, body: { jobId: 'crash', existing: true } });
    expect(startedJobs(c)).toEqual(['crash']);
    expect(sha256Hex((await c.blobStore.get(blobKeys.jobGraph('crash')))!)).toBe(record.jobGraphSha256);
  });

  it('a submission left SUBMITTING past dispatcher.submission-timeout is ended FAILED by the reconciler, naming what is missing', async () => {
    const clock = new ManualClock();
    const c = await startCluster({ clock, config: { 'dispatcher.submission-timeout': 60_000 } });
    c.blobStore.beforePut = async (key) => {
      if (key === blobKeys.jobGraph('lost')) throw new Error('disk full');
    };
    const b = await body('lost');
    expect((await c.call('POST', '/jobs', b)).status).toBe(500);
    // A submitter may still be at work until the timeout: the reconciler leaves the record alone.
    clock.advance(59_999);
    await c.dispatcher.reconcile();
    expect((await c.jobStore.get(JobId.of('lost')))!.admission?.state).toBe(AdmissionState.SUBMITTING);

    clock.advance(1);
    await c.dispatcher.reconcile();
    const ended = (await c.jobStore.get(JobId.of('lost')))!;
    expect(ended).toMatchObject({ status: 'FAILED', endedAtMs: clock.now(), admission: { state: AdmissionState.RELEASED } });
    const message = ended.exceptions.at(-1)!.message;
    expect(message).toContain('the submission of job lost did not complete');
    expect(message).toContain(`its JobGraph was not stored (${blobKeys.jobGraph('lost')})`);
    expect(message).toContain("within 'dispatcher.submission-timeout' (60000 ms; it began 60000 ms ago)");
    expect((await c.call('GET', '/jobs/lost')).body).toMatchObject({ status: 'FAILED' });
    expect(c.started).toEqual([]);
    expect(await c.jobStore.admissionLedger()).toEqual({ waiting: [], admitted: [] });
    // The same request again is the job that ended: nothing starts, and the record stays as it is.
    c.blobStore.beforePut = async () => undefined;
    expect(await c.call('POST', '/jobs', b)).toEqual({ status: 202, body: { jobId: 'lost', existing: true } });
    expect(c.started).toEqual([]);
    expect(await c.jobStore.get(JobId.of('lost'))).toEqual(ended);
  });

  it('a submission whose submitter stopped after storing its JobGraph and library is put in line by the reconciler and starts', async () => {
    const clock = new ManualClock();
    class LostAnswerJobStore extends InMemoryJobStore {
      failNext = true;
      override async enqueueAndAdmit(...args: Parameters<InMemoryJobStore['enqueueAndAdmit']>): ReturnType<InMemoryJobStore['enqueueAndAdmit']> {
        if (this.failNext) {
          this.failNext = false;
          await args[2]?.jobManager; // the blobs are stored, then the store cannot be reached
          throw new Error('connection reset by peer');
        }
        return super.enqueueAndAdmit(...args);
      }
    }
    const c = await startCluster({ clock, jobStore: new LostAnswerJobStore(clock), config: { 'dispatcher.submission-timeout': 60_000 } });
    expect((await c.call('POST', '/jobs', await body('orphan'))).status).toBe(500);
    expect((await c.jobStore.get(JobId.of('orphan')))!.admission?.state).toBe(AdmissionState.SUBMITTING);
    expect(await c.blobStore.exists(blobKeys.jobGraph('orphan'))).toBe(true);
    await c.dispatcher.reconcile();
    expect(c.started).toEqual([]);

    clock.advance(60_000);
    await c.dispatcher.reconcile();
    expect(startedJobs(c)).toEqual(['orphan']);
    const record = (await c.jobStore.get(JobId.of('orphan')))!;
    expect(record).toMatchObject({ status: 'INITIALIZING', exceptions: [], admission: { state: AdmissionState.ADMITTED } });
  });

  it('a graph sent with its fields in another order is the same job', async () => {
    const c = await startCluster();
    const b = await body('order');
    expect((await c.call('POST', '/jobs', b)).status).toBe(202);
    const reordered = Object.fromEntries(Object.entries(b.jobGraph).reverse());
    expect(await c.call('POST', '/jobs', { ...b, jobGraph: reordered })).toEqual({ status: 202, body: { jobId: 'order', existing: true } });
  });

  it('an object under the library key that is not the library is refused, named and left in place; an upload of the real bytes replaces it', async () => {
    const c = await startCluster();
    const { sha256, library } = fixtureLibrary();
    // What a presigned upload URL allows: any bytes under the key.
    const garbage = Buffer.from('export const notTheLibrary = 1;');
    await c.blobStore.put(blobKeys.library(sha256), garbage);
    const { jobGraph } = await body('lib');
    const refused = await c.call('POST', '/jobs', { jobGraph });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain(`has sha256 ${sha256Hex(garbage)}`);
    expect(Buffer.from((await c.blobStore.get(blobKeys.library(sha256)))!)).toEqual(garbage);
    expect(await c.jobStore.get(JobId.of('lib'))).toBeUndefined();

    const offer = await c.call('POST', '/artifacts', { sha256, sizeBytes: library.length });
    expect(offer.body).toMatchObject({ exists: false, upload: { method: 'PUT' } });
    expect((await c.call('PUT', offer.body.upload.url, Buffer.from(library))).status).toBe(201);
    expect(await c.call('POST', '/jobs', { jobGraph })).toEqual({ status: 202, body: { jobId: 'lib' } });
  });

  it('a library checked in the store a moment ago is not read back for the next jobs; a minute later it is, and one gone is asked for again', async () => {
    const clock = new ManualClock();
    const c = await startCluster({ clock });
    const { sha256, library } = fixtureLibrary();
    const key = blobKeys.library(sha256);
    const libraryReads = () => c.blobStore.reads.filter((k) => k === key).length;
    expect((await c.call('POST', '/jobs', await body('first'))).status).toBe(202);
    const afterFirst = libraryReads();
    // What a client does next time: asks whether the library is stored, then names it without its bytes.
    expect((await c.call('POST', '/artifacts', { sha256, sizeBytes: library.length })).body).toMatchObject({ exists: true });
    expect((await c.call('POST', '/jobs', { jobGraph: (await body('second')).jobGraph })).status).toBe(202);
    expect((await c.call('POST', '/jobs', await body('third'))).status).toBe(202);
    expect(libraryReads(), 'no read of the library after the first job').toBe(afterFirst);
    // A wrong size is still refused, from what was checked.
    const wrong = await c.call('POST', '/jobs', { jobGraph: { ...(await body('fourth')).jobGraph, library: { sha256, sizeBytes: 1 } } });
    expect(wrong.body.error.message).toBe(
      `jobGraph.library.sizeBytes says 1, but the stored library ${sha256} has ${library.length} bytes; send its real size`,
    );

    // The library expires from the store; a minute after it was checked, the Dispatcher looks again.
    await c.blobStore.delete(key);
    clock.advance(60_000);
    expect((await c.call('POST', '/artifacts', { sha256, sizeBytes: library.length })).body).toMatchObject({ exists: false });
    const refused = await c.call('POST', '/jobs', { jobGraph: (await body('fifth')).jobGraph });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toMatch(/is not stored yet/);
    expect(libraryReads()).toBe(afterFirst + 2);
    // Sent again with its bytes, it is stored again.
    expect((await c.call('POST', '/jobs', await body('fifth'))).status).toBe(202);
    expect(sha256Hex((await c.blobStore.get(key))!)).toBe(sha256);
  });

  it('a wrong sizeBytes for a stored library is refused naming both sizes, and the library stays', async () => {
    const c = await startCluster();
    expect((await c.call('POST', '/jobs', await body('first'))).status).toBe(202);
    const { jobGraph } = await body('second');
    const { sha256, library } = fixtureLibrary();
    const refused = await c.call('POST', '/jobs', { jobGraph: { ...jobGraph, library: { sha256, sizeBytes: 1 } } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toBe(
      `jobGraph.library.sizeBytes says 1, but the stored library ${sha256} has ${library.length} bytes; send its real size`,
    );
    expect(Buffer.from((await c.blobStore.get(blobKeys.library(sha256)))!)).toEqual(Buffer.from(library));
  });
});

describe('admission control', () => {
  it('jobs beyond the bounds wait, visible with their place in line, and start in submission order as JobManagers end', async () => {
    const c = await startCluster({ config: { 'cluster.max-jobmanagers': 2 } });
    for (const id of ['a', 'b', 'c', 'd']) expect((await c.call('POST', '/jobs', await body(id))).status).toBe(202);
    expect(startedJobs(c)).toEqual(['a', 'b']);
    expect((await c.call('GET', '/jobs/a')).body.waiting).toBeUndefined();
    expect((await c.call('GET', '/jobs/c')).body).toMatchObject({ status: 'INITIALIZING', waiting: { position: 1, of: 2 } });
    expect((await c.call('GET', '/jobs/d')).body).toMatchObject({ status: 'INITIALIZING', waiting: { position: 2, of: 2 } });
    const list = (await c.call('GET', '/jobs')).body.jobs as { jobId: string; waiting?: unknown }[];
    expect(Object.fromEntries(list.map((j) => [j.jobId, j.waiting]))).toEqual({
      a: undefined,
      b: undefined,
      c: { position: 1, of: 2 },
      d: { position: 2, of: 2 },
    });
    expect((await c.call('GET', '/overview')).body.admission).toEqual({
      waiting: 2,
      jobManagers: { running: 2, max: 2 },
      taskExecutors: { reserved: 2, max: 8 },
    });

    await c.exit('b');
    expect(startedJobs(c)).toEqual(['a', 'b', 'c']);
    expect((await c.call('GET', '/jobs/d')).body.waiting).toEqual({ position: 1, of: 1 });
    // A JobManager that exits before its job ended is replaced: the job keeps its capacity, d keeps waiting.
    await c.exit('a', 1);
    await waitUntil(async () => c.started.length === 4);
    expect(c.started.map((s) => s.id)).toEqual(['jobmanager-a', 'jobmanager-b', 'jobmanager-c', 'jobmanager2-a']);
    expect((await c.call('GET', '/jobs/d')).body.waiting).toEqual({ position: 1, of: 1 });
    await c.exit('a');
    expect(startedJobs(c)).toEqual(['a', 'b', 'c', 'a', 'd']);
  });

  it('each JobManager may start only the TaskExecutors its job reserved, and the TaskExecutor bound holds jobs back too', async () => {
    const c = await startCluster({ config: { 'cluster.max-taskmanagers': 5 } });
    // parallelism 5 at 2 slots per TaskExecutor: 3 TaskExecutors; parallelism 4: 2; together 5.
    expect((await c.call('POST', '/jobs', await body('five', withParallelism(5)))).status).toBe(202);
    expect((await c.call('POST', '/jobs', await body('four', withParallelism(4)))).status).toBe(202);
    expect((await c.call('POST', '/jobs', await body('one', withParallelism(1)))).status).toBe(202);
    expect(startedJobs(c)).toEqual(['five', 'four']);
    const caps = c.started.map((s) => configFromEnv({ [CONFIG_ENV]: s.env[CONFIG_ENV] }).maxTaskManagers);
    expect(caps).toEqual([3, 2]);
    expect((await c.call('GET', '/jobs/one')).body.waiting).toEqual({ position: 1, of: 1 });
    await c.exit('four');
    expect(startedJobs(c)).toEqual(['five', 'four', 'one']);
  });

  it('a job that could never fit even an empty cluster is refused at submission, saying what it needs and what the cluster allows', async () => {
    const c = await startCluster({ config: { 'cluster.max-taskmanagers': 6 } });
    const res = await c.call('POST', '/jobs', await body('huge', withParallelism(13)));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('JOB_EXCEEDS_CLUSTER');
    expect(res.body.error.message).toMatch(/needs 13 slots, that is 7 TaskExecutors of 2 slots/);
    expect(res.body.error.message).toMatch(/at most 6 .*'resourcemanager.max-taskmanagers'.*'cluster.max-taskmanagers'/);
    expect(await c.jobStore.list()).toEqual([]);
    expect(await c.blobStore.list('')).toEqual([]);
  });

  it('a submission never fails because the cluster is busy', async () => {
    const c = await startCluster({ config: { 'cluster.max-jobmanagers': 1, 'cluster.max-taskmanagers': 1 } });
    const answers = await Promise.all(Array.from({ length: 20 }, async (_, i) => c.call('POST', '/jobs', await body(`busy-${i}`))));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(202));
    expect(c.started).toHaveLength(1);
    expect((await c.jobStore.admissionLedger()).waiting).toHaveLength(19);
  });

  it('canceling a waiting job ends it CANCELED at once; it never starts and the line moves up', async () => {
    const c = await startCluster({ config: { 'cluster.max-jobmanagers': 1 } });
    for (const id of ['x', 'y', 'z']) await c.call('POST', '/jobs', await body(id));
    expect(await c.call('PATCH', '/jobs/y?mode=cancel')).toEqual({ status: 202, body: { jobId: 'y', status: 'CANCELED' } });
    expect((await c.call('GET', '/jobs/z')).body.waiting).toEqual({ position: 1, of: 1 });
    await c.exit('x');
    expect(startedJobs(c)).toEqual(['x', 'z']);
    expect((await c.call('GET', '/jobs/y')).body.status).toBe('CANCELED');
  });

  it('a JobManager that cannot be started fails its job and hands the capacity to the next in line', async () => {
    const c = await startCluster({ config: { 'cluster.max-jobmanagers': 1 }, failLaunchOf: (spec) => spec.env['FLOE_JOB_ID'] === 'doomed' });
    await c.call('POST', '/jobs', await body('doomed'));
    await c.call('POST', '/jobs', await body('next'));
    expect(startedJobs(c)).toEqual(['next']);
    const doomed = (await c.call('GET', '/jobs/doomed')).body;
    expect(doomed.status).toBe('FAILED');
    expect((await c.call('GET', '/jobs/doomed/exceptions')).body.exceptions[0].message).toMatch(/could not be started: no room for another process/);
  });

  it('a restarted Dispatcher finds a job whose JobManager ended with its predecessor, launches a successor once no lease shows one, and keeps the line', async () => {
    const clock = new ManualClock();
    const jobStore = new InMemoryJobStore(clock);
    const blobStore = new ControlledBlobStore();
    const before = await startCluster({ jobStore, blobStore, clock, config: { 'cluster.max-jobmanagers': 1 } });
    await before.call('POST', '/jobs', await body('old'));
    await before.call('POST', '/jobs', await body('queued'));
    expect(startedJobs(before)).toEqual(['old']);
    // The Dispatcher stops without hearing its JobManager go.
    before.dispatcher.close();

    const after = await startCluster({ jobStore, blobStore, clock, config: { 'cluster.max-jobmanagers': 1 } });
    // A JobManager that was just launched gets time to win its lease: nothing is started yet.
    expect(after.started).toEqual([]);
    clock.advance(30_000);
    await after.dispatcher.reconcile();
    expect(after.started.map((s) => s.id)).toEqual(['jobmanager2-old']);
    const old = (await after.call('GET', '/jobs/old')).body;
    expect(old.status).not.toMatch(/FAILED|CANCELED/);
    expect((await after.call('GET', '/jobs/old/exceptions')).body.exceptions).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/no JobManager of this launch ever held its lease; a new JobManager recovers the job \(launch 2 of at most 4\)/),
        recovered: true,
      }),
    ]);
    // The job keeps its place; the next in line starts when it ends.
    await after.exit('old');
    expect(startedJobs(after)).toEqual(['old', 'queued']);
  });

  it("relaunches a job's JobManager that ended before the job did, up to 'jobmanager.max-attempts', then fails the job saying why", async () => {
    const c = await startCluster({ config: { 'jobmanager.max-attempts': 2 } });
    await c.call('POST', '/jobs', await body('fragile'));
    await c.exit('fragile', 137);
    await waitUntil(async () => c.started.length === 2);
    expect(c.started.map((s) => s.id)).toEqual(['jobmanager-fragile', 'jobmanager2-fragile']);
    await c.exit('fragile', 137);
    const job = (await c.call('GET', '/jobs/fragile')).body;
    expect(job.status).toBe('FAILED');
    const messages = (await c.call('GET', '/jobs/fragile/exceptions')).body.exceptions.map((e: { message: string }) => e.message);
    expect(messages[0]).toMatch(/the JobManager process exited with code 137; a new JobManager recovers the job \(launch 2 of at most 2\)/);
    expect(messages[1]).toMatch(/2 JobManagers were launched for the job \('jobmanager.max-attempts' is 2\), so it is not recovered again/);
  });
});

async function waitUntil(probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error('condition never held');
}

describe('the warm pool at submission', () => {
  it('hands a job to a ready JobManager by its claim, and tells it only when it can reach it', async () => {
    for (const reaches of [true, false]) {
      const c = await startCluster({ config: { 'cluster.warm-pool.jobmanagers': 1 }, reachesJobManagers: reaches });
      // A ready JobManager: its place in the pool names its address, where it serves its standby gateway.
      const told: string[] = [];
      const standby = new LocalRpcService(c.network, `ready-jm-${reaches}`);
      cleanups.push(() => standby.close());
      standby.serve<StandbyJobManagerGateway>(
        EndpointName.STANDBY_JOB_MANAGER,
        { claimTaken: async (holder) => void told.push(holder), warmTaskExecutors: async () => [] },
        { methods: STANDBY_JOB_MANAGER_METHODS },
      );
      const holder = `jobmanager-ready${reaches ? 1 : 2}#0a1b2c3d`;
      expect(await c.leaseStore.tryAcquire(leaseNames.standbyJobManager(0), holder, standby.address, 60_000)).toBeDefined();

      const jobId = JobId.random();
      expect((await c.call('POST', '/jobs', await body(jobId))).status).toBe(202);
      // No process started: the ready one has the job, through its claim.
      expect(c.started).toEqual([]);
      const claim = await c.leaseStore.get(leaseNames.standbyClaim(holder));
      expect(claim === undefined ? undefined : parseStandbyClaim(claim.holder)?.jobId).toBe(jobId);
      // The submission does not wait for the notice: give it time to arrive (or, unreached, to not).
      for (let i = 0; i < 100 && told.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(told).toEqual(reaches ? [holder] : []);
    }
  });

  it('a ready JobManager killed just before it is given a job (its exit not seen yet) hands the job on as the same launch, not as a recovery', async () => {
    const c = await startCluster({ config: { 'cluster.warm-pool.jobmanagers': 1 }, reachesJobManagers: true });
    // A ready JobManager this Dispatcher started: still running as far as the launcher knows, but nothing
    // listens where its place says it serves (killed a moment ago).
    await c.launcher.start({ id: 'jobmanager-ready', kind: WorkerKind.JOB_MANAGER, env: {} });
    const holder = 'jobmanager-ready#0a1b2c3d';
    expect(await c.leaseStore.tryAcquire(leaseNames.standbyJobManager(0), holder, 'killed-ready-jm', 60_000)).toBeDefined();

    expect((await c.call('POST', '/jobs', await body('after-kill'))).status).toBe(202);
    // Its exit reaches the Dispatcher while the job is being given to it.
    c.exitWorker('jobmanager-ready', 137);
    for (let i = 0; i < 1000 && !startedJobs(c).includes('after-kill'); i++) await new Promise((r) => setTimeout(r, 2));
    expect(c.started.slice(1).map((s) => s.id)).toEqual([jobManagerWorkerId('after-kill')]);
    // Started for it as its first launch: the job never ran on the dead one, so nothing was recovered.
    expect((await c.jobStore.get(JobId.of('after-kill')))!.jobManager).toMatchObject({ launches: 1, workerId: jobManagerWorkerId('after-kill') });
  });

  it('with a store that takes the claim in the admission: the ready JobManager gets the job; one whose claim is held, the next one, or a process started', async () => {
    const clock = new ManualClock();
    // Counts the takes of claims: each is a write to the store, on the path to the job's start.
    const claimTakes: string[] = [];
    const leaseStore = new (class extends InMemoryLeaseStore {
      override tryAcquire(name: string, holder: string, address: string, durationMs: number) {
        if (name.startsWith(leaseNames.standbyClaim(''))) claimTakes.push(name);
        return super.tryAcquire(name, holder, address, durationMs);
      }
    })(clock);
    // As the DynamoDB store does it: the claim in the admission's step, its outcome in `leaseTaken`.
    class ClaimingJobStore extends InMemoryJobStore {
      override async enqueueAndAdmit(...args: Parameters<JobStore['enqueueAndAdmit']>): ReturnType<JobStore['enqueueAndAdmit']> {
        const outcome = await super.enqueueAndAdmit(...args);
        const take = await args[2]?.takeLease;
        if (outcome.admitted === undefined || take === undefined) return outcome;
        return { ...outcome, leaseTaken: (await leaseStore.tryAcquire(take.name, take.holder, take.address, take.durationMs)) !== undefined };
      }
    }
    const c = await startCluster({ clock, leaseStore, jobStore: new ClaimingJobStore(clock), config: { 'cluster.warm-pool.jobmanagers': 2 } });
    const ready = ['jobmanager-one#0a1b2c3d', 'jobmanager-two#4e5f6a7b'];
    for (const [i, holder] of ready.entries()) expect(await leaseStore.tryAcquire(leaseNames.standbyJobManager(i), holder, `ready-${i}`, 60_000)).toBeDefined();
    const claimedJob = async (holder: string) => parseStandbyClaim((await leaseStore.get(leaseNames.standbyClaim(holder)))?.holder ?? '')?.jobId;

    expect((await c.call('POST', '/jobs', await body('first'))).status).toBe(202);
    expect(await claimedJob(ready[0]!)).toBe('first');
    expect((await c.jobStore.get(JobId.of('first')))!.jobManager?.workerId).toBe('jobmanager-one');
    expect(claimTakes, 'the claim is taken once, with the admission').toHaveLength(1);
    // The first one's claim is held now (its job runs): the next job goes to the second.
    expect((await c.call('POST', '/jobs', await body('second'))).status).toBe(202);
    expect(await claimedJob(ready[1]!)).toBe('second');
    expect((await c.jobStore.get(JobId.of('second')))!.jobManager?.workerId).toBe('jobmanager-two');
    expect(claimTakes.slice(1), 'the refused claim is not tried again').toEqual([leaseNames.standbyClaim(ready[0]!), leaseNames.standbyClaim(ready[1]!)]);
    // Both held: a process is started for the third, and the record names it.
    expect((await c.call('POST', '/jobs', await body('third'))).status).toBe(202);
    expect(startedJobs(c)).toEqual(['third']);
    expect((await c.jobStore.get(JobId.of('third')))!.jobManager?.workerId).toBe(jobManagerWorkerId('third'));
    expect(c.started).toHaveLength(1);
  });
});
