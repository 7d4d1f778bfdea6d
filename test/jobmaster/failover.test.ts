// The JobMaster recovering from failures, against small real peers (TaskExecutor doubles that record
// what they are asked to run, a ResourceManager double) on a manual clock: region restarts with new
// attempts, stale updates ignored, lost TaskExecutors and lost partitions, the restart strategy giving
// up, cancel, and a JobMaster that steps down when the store names a newer leader.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { loadConfig } from '../../runtime/core/config.js';
import { FloeError } from '../../runtime/core/errors.js';
import { AllocationId, FencingToken, JobId, ResourceId, ResultPartitionId, type ExecutionAttemptId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import type { JobRecordUpdate, JobRecovery } from '../../runtime/ha/job-store.js';
import type { DistributionPattern, JobEdge, JobGraph, JobVertex, OperatorSpec, PartitionType } from '../../runtime/jobgraph/jobgraph.js';
import type { CompletedCheckpoint } from '../../runtime/ha/completed-checkpoint-store.js';
import type { JobCheckpointServices } from '../../runtime/jobmaster/job-checkpointing.js';
import { JobMaster } from '../../runtime/jobmaster/jobmaster.js';
import { InMemoryCheckpointIdCounter } from '../../runtime/memory/in-memory-checkpoint-id-counter.js';
import { InMemoryCompletedCheckpointStore } from '../../runtime/memory/in-memory-completed-checkpoint-store.js';
import type { CheckpointMetrics, TaskStateSnapshot } from '../../runtime/protocol/checkpoints.js';
import { InMemoryCheckpointStorage } from '../support/in-memory-checkpoint-storage.js';
import { InMemoryBlobStore } from '../../runtime/memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../../runtime/memory/in-memory-job-store.js';
import type { JobMasterGateway } from '../../runtime/protocol/jobmaster-gateway.js';
import { RESOURCE_MANAGER_METHODS, type ResourceManagerGateway } from '../../runtime/protocol/resourcemanager-gateway.js';
import { inputChannelsOf, type TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';
import { TASK_EXECUTOR_METHODS } from '../../runtime/protocol/taskexecutor-gateway.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { TestingTaskExecutorGateway } from '../support/testing-task-executor-gateway.js';

const jobId = JobId.of('job-failover');
const JM_TOKEN = FencingToken.of(7);
const RM_TOKEN = FencingToken.of(9);

const seq = (id: string): OperatorSpec => ({ kind: 'source.sequence', id, name: id, from: 1, to: 10 });
const mapOp = (id: string): OperatorSpec => ({ kind: 'map', id, name: id, fn: { export: 'default', operatorId: id } });
const sinkOp = (id: string): OperatorSpec => ({ kind: 'sink.collect', id, name: id, maxRecords: 10 });

function v(id: string, parallelism: number, op: OperatorSpec, group = 'default'): JobVertex {
  return { id, name: id, parallelism, maxParallelism: 128, slotSharingGroup: group, operators: [op] };
}
function e(source: string, target: string, partitionType: PartitionType, distribution: DistributionPattern = 'all-to-all'): JobEdge {
  return { id: `${source}-${target}`, source, target, distribution, partitioner: distribution === 'forward' ? 'forward' : 'rebalance', partitionType };
}
function graph(vertices: JobVertex[], edges: JobEdge[]): JobGraph {
  return { jobId, name: 'g', library: { sha256: 'ef'.repeat(32), sizeBytes: 1 }, program: { export: 'default', args: [] }, vertices, edges };
}

/** A JobStore whose writes can be made to fail, as a flaky database would. */
class FlakyJobStore extends InMemoryJobStore {
  failNextWrites = 0;
  override async update(id: JobId, update: JobRecordUpdate, epoch: number) {
    if (this.failNextWrites > 0) {
      this.failNextWrites--;
      throw new FloeError('DATABASE_BUSY', 'the database is busy', { retryable: true });
    }
    return super.update(id, update, epoch);
  }
}

describe('JobMaster failover', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(
    g: JobGraph,
    options: { taskExecutors?: number; slotsEach?: number; config?: Record<string, unknown>; recovery?: JobRecovery; checkpoints?: JobCheckpointServices } = {},
  ) {
    const clock = new ManualClock();
    const network = new LocalRpcNetwork();
    const jobStore = new FlakyJobStore(clock);
    await jobStore.create({
      jobId,
      name: g.name,
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: 0,
      updatedAtMs: 0,
      jobGraphKey: 'k',
      librarySha256: 'x',
      parallelism: 2,
      exceptions: [],
      cancelRequested: false,
    });
    const declared: number[] = [];
    const rmImpl = {
      registerJobMaster: async () => ({ resourceManagerResourceId: ResourceId.of('rm') }),
      declareRequiredResources: async (_j: JobId, _t: FencingToken, r: { slots: number }) => void declared.push(r.slots),
      disconnectJobManager: async () => {},
      requestClusterResources: async () => ({
        registeredTaskExecutors: 1,
        slotsPerTaskExecutor: 2,
        totalSlots: 2,
        freeSlots: 0,
        pendingTaskExecutors: 0,
        maxTaskExecutors: 2,
      }),
    };
    const rmRpc = new LocalRpcService(network, 'rm');
    rmRpc.serve('resourcemanager', rmImpl as unknown as ResourceManagerGateway, {
      methods: RESOURCE_MANAGER_METHODS.filter((m) => m in rmImpl),
      fencingToken: RM_TOKEN,
    });
    const deployed: TaskDeploymentDescriptor[] = [];
    const cancelled: string[] = [];
    const released: { taskExecutor: string; partitions: string[] }[] = [];
    const rpcs: LocalRpcService[] = [rmRpc];
    const addTaskExecutor = (id: string): void => {
      const gateway = TestingTaskExecutorGateway.builder(id)
        .setSubmitTaskFunction(async (tdd) => void deployed.push(tdd))
        .setCancelTaskFunction(async (attemptId) => void cancelled.push(attemptId))
        .setReleasePartitionsFunction(async (_job, partitions) => void released.push({ taskExecutor: id, partitions: [...partitions] }))
        .build();
      const rpc = new LocalRpcService(network, id);
      rpc.serve(EndpointName.TASK_EXECUTOR, gateway, { methods: TASK_EXECUTOR_METHODS });
      rpcs.push(rpc);
    };
    const jmRpc = new LocalRpcService(network, 'jm');
    const config = loadConfig({
      'slot.request.timeout': 60_000,
      'restart-strategy.type': 'fixed-delay',
      'restart-strategy.fixed-delay.delay': 100,
      ...options.config,
    });
    const jobMaster = new JobMaster({
      jobGraph: g,
      resourceId: ResourceId.of('jm'),
      fencingToken: JM_TOKEN,
      config,
      rpc: jmRpc,
      jobStore,
      blobStore: new InMemoryBlobStore(),
      clock,
      logger: silentLogger,
      resolveResourceManager: async () => ({ address: rmRpc.address, token: RM_TOKEN }),
      ...(options.recovery !== undefined ? { recovery: options.recovery } : {}),
      ...(options.checkpoints !== undefined ? { checkpoints: options.checkpoints } : {}),
    });
    await jobMaster.start();
    const client = new LocalRpcService(network, 'client');
    const jm = client.connect<JobMasterGateway>(jmRpc.address, EndpointName.JOB_MASTER, { fencingToken: JM_TOKEN });
    cleanups.push(async () => {
      await jobMaster.close();
      await Promise.all([...rpcs, jmRpc, client].map((r) => r.close()));
    });
    const register = async (id: string, slots: number, partitions: string[] = []): Promise<void> => {
      addTaskExecutor(id);
      const resourceId = ResourceId.of(id);
      await jm.registerTaskManager({
        resourceId,
        address: `local://${id}`,
        dataAddress: `127.0.0.1:1`,
        partitions: partitions.map((p) => ResultPartitionId.of(p)),
      });
      await jm.offerSlots(
        resourceId,
        Array.from({ length: slots }, (_, s) => ({ allocationId: AllocationId.of(`${id}-${s}`), slotIndex: s })),
      );
    };
    for (let i = 0; i < (options.taskExecutors ?? 1); i++) await register(`te-${i}`, options.slotsEach ?? 2);
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 30; i++) await new Promise((r) => setImmediate(r));
    };
    const run = (tdd: TaskDeploymentDescriptor) => jm.updateTaskExecutionState({ attemptId: tdd.attemptId, state: 'RUNNING' });
    const finish = async (tdd: TaskDeploymentDescriptor): Promise<boolean> => {
      await run(tdd);
      return jm.updateTaskExecutionState({ attemptId: tdd.attemptId, state: 'FINISHED', result: { recordsIn: 1, recordsOut: 1 } });
    };
    const fail = (tdd: TaskDeploymentDescriptor, message = 'boom') =>
      jm.updateTaskExecutionState({
        attemptId: tdd.attemptId,
        state: 'FAILED',
        error: { code: 'USER_CODE', message, retryable: false, stack: `Error: ${message}\n    at job.ts:4:11` },
      });
    /** Tasks of a vertex deployed for a given attempt number. */
    const of = (vertexId: string, attempt = 0) => deployed.filter((t) => t.vertexId === vertexId && t.attemptNumber === attempt);
    /** Lets the restart delay pass. */
    const afterDelay = async (): Promise<void> => {
      await settle();
      clock.advance(100);
      await settle();
    };
    return { clock, jobStore, jobMaster, jm, deployed, cancelled, released, declared, register, settle, run, finish, fail, of, afterDelay };
  }

  it('restarts the region of a task whose user function threw once; the job FINISHES and the exception shows it recovered', async () => {
    const g = graph(
      [v('src', 2, seq('src')), v('map', 2, mapOp('map')), v('sink', 2, sinkOp('sink'))],
      [e('src', 'map', 'pipelined'), e('map', 'sink', 'pipelined', 'forward')],
    );
    const { jm, jobStore, jobMaster, deployed, cancelled, settle, run, finish, fail, of, afterDelay } = await setup(g);
    await settle();
    expect(deployed).toHaveLength(6);
    for (const t of deployed) await run(t);
    await fail(of('map')[0]!);
    await settle();
    // Its region (the whole pipeline) stops; nothing new goes out before the others ended and the wait passed.
    expect(cancelled).toHaveLength(5);
    for (const id of cancelled) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await settle();
    expect(deployed).toHaveLength(6);
    await afterDelay();
    expect(deployed.filter((t) => t.attemptNumber === 1)).toHaveLength(6);
    // An update from the old attempt is ignored.
    expect(await finish(of('src')[0]!)).toBe(false);
    for (const t of deployed.filter((t) => t.attemptNumber === 1)) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const record = (await jobStore.get(jobId))!;
    expect(record.restarts).toBe(1);
    expect(record.exceptions).toEqual([
      expect.objectContaining({
        taskName: expect.stringMatching(/^map \(\d\/2\)$/),
        attemptNumber: 0,
        message: 'boom',
        stack: expect.stringContaining('job.ts:4:11'),
        recovered: true,
        restartedTasks: 6,
        restartDelayMs: 100,
      }),
    ]);
    expect(jobMaster.snapshot().tasks.every((t) => t.attemptNumber === 1 && t.priorAttempts.length === 1)).toBe(true);
  });

  it('keeps the tasks of an independent pipeline at attempt 0 when the other one fails', async () => {
    const g = graph(
      [v('a1', 2, seq('a1')), v('b1', 2, sinkOp('b1')), v('a2', 2, seq('a2')), v('b2', 2, sinkOp('b2'))],
      [e('a1', 'b1', 'pipelined'), e('a2', 'b2', 'pipelined')],
    );
    const { jm, jobMaster, deployed, cancelled, settle, run, finish, fail, of, afterDelay } = await setup(g);
    await settle();
    expect(deployed).toHaveLength(8);
    for (const t of deployed) await run(t);
    await fail(of('b2')[1]!);
    await settle();
    expect(cancelled.sort()).toEqual([...of('a2'), of('b2')[0]!].map((t) => t.attemptId).sort());
    for (const id of cancelled) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await afterDelay();
    expect(
      deployed
        .filter((t) => t.attemptNumber === 1)
        .map((t) => t.vertexId)
        .sort(),
    ).toEqual(['a2', 'a2', 'b2', 'b2']);
    for (const t of [...of('a1'), ...of('b1'), ...deployed.filter((t) => t.attemptNumber === 1)]) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const tasks = jobMaster.snapshot().tasks;
    expect(tasks.filter((t) => t.vertexId.endsWith('1')).map((t) => t.attemptNumber)).toEqual([0, 0, 0, 0]);
    expect(tasks.filter((t) => t.vertexId.endsWith('2')).map((t) => t.attemptNumber)).toEqual([1, 1, 1, 1]);
  });

  it('does not rerun finished producers of a failed blocking consumer while their partitions survive', async () => {
    const g = graph([v('src', 2, seq('src')), v('sink', 2, sinkOp('sink'))], [e('src', 'sink', 'blocking')]);
    const { jobMaster, deployed, settle, finish, fail, of, afterDelay } = await setup(g);
    await settle();
    for (const t of of('src')) await finish(t);
    await settle();
    expect(of('sink')).toHaveLength(2);
    await fail(of('sink')[0]!);
    await fail(of('sink')[1]!, 'echo of the first failure');
    await afterDelay();
    expect(of('src', 1)).toEqual([]);
    const retried = of('sink', 1);
    expect(retried).toHaveLength(2);
    // They read the same partitions as the first attempt did.
    expect(inputChannelsOf(retried[0]!.inputs[0]!).map((c) => c.partitionId)).toEqual(inputChannelsOf(of('sink')[0]!.inputs[0]!).map((c) => c.partitionId));
    for (const t of retried) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    // One failure event: the second report came from a task already being restarted.
    expect(jobMaster.snapshot().restarts).toBe(1);
    expect(deployed).toHaveLength(6);
  });

  it('moves the tasks of a lost TaskExecutor to new slots, and reruns a finished producer whose partitions went with it', async () => {
    const g = graph([v('src', 2, seq('src')), v('sink', 2, sinkOp('sink'))], [e('src', 'sink', 'blocking')]);
    const { jm, jobStore, jobMaster, declared, cancelled, register, settle, finish, of, afterDelay } = await setup(g, { taskExecutors: 2, slotsEach: 1 });
    await settle();
    for (const t of of('src')) await finish(t);
    await settle();
    expect(of('sink')).toHaveLength(2);
    const lost = of('sink').find((t) => t.allocationId.startsWith('te-1'))!;
    await jm.disconnectTaskManager(ResourceId.of('te-1'), 'process ended: killed by signal SIGKILL');
    await settle();
    // The consumer on te-0 is in the same region: it is stopped too.
    expect(cancelled).toEqual(
      of('sink')
        .filter((t) => t !== lost)
        .map((t) => t.attemptId),
    );
    for (const id of cancelled) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await afterDelay();
    // Its slot is gone and the job still needs two: nothing can be placed until a new slot comes.
    expect(of('src', 1)).toEqual([]);
    expect(declared.at(-1)).toBe(2);
    await register('te-2', 1);
    await settle();
    // The partition of the producer that ran on te-1 is gone, so the producer region runs again; then the consumers.
    expect(of('src', 1)).toHaveLength(2);
    expect(of('src', 1).filter((t) => t.allocationId.startsWith('te-2'))).toHaveLength(1);
    for (const t of of('src', 1)) await finish(t);
    await settle();
    expect(of('sink', 1)).toHaveLength(2);
    for (const t of of('sink', 1)) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const record = (await jobStore.get(jobId))!;
    expect(record.exceptions[0]).toMatchObject({
      message: expect.stringContaining('TaskExecutor te-1 was lost: process ended: killed by signal SIGKILL'),
      recovered: true,
      location: 'te-1',
    });
    expect(lost.attemptNumber).toBe(0);
  });

  it("records the producer's own error as the root cause when a consumer's derived partition error arrives first", async () => {
    const g = graph(
      [v('src', 2, seq('src')), v('map', 2, mapOp('map')), v('sink', 2, sinkOp('sink'))],
      [e('src', 'map', 'pipelined'), e('map', 'sink', 'pipelined', 'forward')],
    );
    const { jm, jobStore, jobMaster, cancelled, settle, run, finish, fail, of, afterDelay } = await setup(g);
    await settle();
    for (const t of [...of('src'), ...of('map'), ...of('sink')]) await run(t);
    // The consumer hears of the producer's failure through its input before the producer's own report comes.
    await jm.updateTaskExecutionState({
      attemptId: of('sink')[0]!.attemptId,
      state: 'FAILED',
      error: {
        code: 'PARTITION',
        message: `input subpartition 0 of p-1 failed: partition p-1 is no longer held by this worker (released or its producer failed)`,
        retryable: true,
      },
    });
    await fail(of('map')[0]!, 'the producer broke');
    await settle();
    for (const id of cancelled.splice(0)) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await afterDelay();
    for (const t of [...of('src', 1), ...of('map', 1), ...of('sink', 1)]) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const record = (await jobStore.get(jobId))!;
    expect(record.exceptions.map((x) => [x.taskName, x.message])).toEqual([[expect.stringMatching(/^map \(\d\/2\)$/), 'the producer broke']]);
    expect(record.restarts).toBe(1);
  });

  it('counts a lost TaskExecutor as one restart when a consumer elsewhere reports its lost input first', async () => {
    const g = graph([v('src', 2, seq('src')), v('sink', 2, sinkOp('sink'))], [e('src', 'sink', 'blocking')]);
    const { jm, jobStore, jobMaster, cancelled, register, settle, finish, of, afterDelay } = await setup(g, { taskExecutors: 2, slotsEach: 1 });
    await settle();
    for (const t of of('src')) await finish(t);
    await settle();
    const survivor = of('sink').find((t) => t.allocationId.startsWith('te-0'))!;
    await jm.updateTaskExecutionState({
      attemptId: survivor.attemptId,
      state: 'FAILED',
      error: { code: 'PARTITION_NOT_FOUND', message: 'cannot reach the producer of p-1 on te-1: connection refused', retryable: true },
    });
    await jm.disconnectTaskManager(ResourceId.of('te-1'), 'process ended: killed by signal SIGKILL');
    await settle();
    for (const id of cancelled.splice(0)) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await afterDelay();
    await register('te-2', 1);
    await settle();
    for (const t of of('src', 1)) await finish(t);
    await settle();
    for (const t of of('sink', 1)) await finish(t);
    expect((await jobMaster.termination).status).toBe('FINISHED');
    const record = (await jobStore.get(jobId))!;
    expect(record.restarts).toBe(1);
    expect(record.exceptions.map((x) => x.message)).toEqual([expect.stringContaining('TaskExecutor te-1 was lost')]);
  });

  it('fails the job once the restart strategy allows no more, saying why', async () => {
    const g = graph([v('src', 1, seq('src')), v('sink', 1, sinkOp('sink'))], [e('src', 'sink', 'pipelined', 'forward')]);
    const { jm, jobStore, jobMaster, cancelled, settle, run, fail, of, afterDelay } = await setup(g, {
      config: { 'restart-strategy.fixed-delay.attempts': 1 },
    });
    await settle();
    for (const t of [...of('src'), ...of('sink')]) await run(t);
    await fail(of('sink')[0]!, 'first');
    await settle();
    for (const id of cancelled.splice(0)) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    await afterDelay();
    for (const t of [...of('src', 1), ...of('sink', 1)]) await run(t);
    await fail(of('sink', 1)[0]!, 'second');
    await settle();
    for (const id of cancelled.splice(0)) await jm.updateTaskExecutionState({ attemptId: id as ExecutionAttemptId, state: 'CANCELED' });
    expect((await jobMaster.termination).status).toBe('FAILED');
    const record = (await jobStore.get(jobId))!;
    expect(record.exceptions.map((x) => [x.message, x.recovered])).toEqual([
      ['first', true],
      ['second', false],
      [expect.stringMatching(/^the job failed: the restart strategy allows no more restarts: fixed-delay \(1 restart, 100 ms apart/), undefined],
    ]);
    expect(record.restarts).toBe(1);
  });

  it('shows tasks that fail while being cancelled (their input closed) as CANCELED', async () => {
    const g = graph([v('src', 2, seq('src')), v('sink', 2, sinkOp('sink'))], [e('src', 'sink', 'pipelined')]);
    const { jm, jobStore, jobMaster, cancelled, settle, run, of } = await setup(g);
    await settle();
    for (const t of [...of('src'), ...of('sink')]) await run(t);
    await jm.cancel();
    await settle();
    expect(cancelled).toHaveLength(4);
    for (const t of of('src')) await jm.updateTaskExecutionState({ attemptId: t.attemptId, state: 'CANCELED' });
    for (const t of of('sink'))
      await jm.updateTaskExecutionState({
        attemptId: t.attemptId,
        state: 'FAILED',
        error: { code: 'CHANNEL', message: 'input channel closed', retryable: true },
      });
    expect((await jobMaster.termination).status).toBe('CANCELED');
    expect((await jobStore.get(jobId))!.tasks).toMatchObject({ total: 4, canceled: 4, failed: 0 });
  });

  it('retries a status write the store refused for a while, then writes it', async () => {
    const g = graph([v('src', 1, seq('src')), v('sink', 1, sinkOp('sink'))], [e('src', 'sink', 'pipelined', 'forward')]);
    const { jobStore, jobMaster, clock, settle, finish, of } = await setup(g);
    await settle();
    jobStore.failNextWrites = 3;
    for (const t of [...of('src'), ...of('sink')]) await finish(t);
    for (let i = 0; i < 10 && (await jobStore.get(jobId))!.status !== 'FINISHED'; i++) {
      clock.advance(2_000);
      await settle();
    }
    expect((await jobMaster.termination).status).toBe('FINISHED');
    expect((await jobStore.get(jobId))!.status).toBe('FINISHED');
  });

  it('steps down without deploying or writing anything more once the store names a newer leader', async () => {
    const g = graph([v('src', 1, seq('src')), v('sink', 1, sinkOp('sink'))], [e('src', 'sink', 'pipelined', 'forward')]);
    const { jobStore, jobMaster, deployed, settle, run, fail, of, afterDelay } = await setup(g);
    await settle();
    for (const t of deployed) await run(t);
    // A newer JobMaster (epoch 8) took the job over and wrote its record.
    await jobStore.update(jobId, { status: 'RUNNING' }, 8);
    await fail(of('sink')[0]!);
    await afterDelay();
    const termination = await jobMaster.termination;
    expect(termination).toMatchObject({ status: 'LEADERSHIP_LOST', message: expect.stringMatching(/epoch 8.*step down/) });
    await afterDelay();
    expect(deployed).toHaveLength(2);
    const record = (await jobStore.get(jobId))!;
    expect(record.epoch).toBe(8);
    expect(record.exceptions).toEqual([]);
  });

  it('restarts a failed task only after the checkpoint whose pointer was being written completed, and restores that one: its commits are never newer than the restore', async () => {
    /** Holds the pointer of checkpoint 2 until released, as a slow store write would. */
    class SlowStore extends InMemoryCompletedCheckpointStore {
      release: () => void = () => {};
      private readonly held = new Promise<void>((resolve) => (this.release = resolve));
      override async addCheckpointAndSubsumeOldest(checkpoint: CompletedCheckpoint, epoch: number, numRetained: number) {
        if (checkpoint.checkpointId === 2) await this.held;
        return super.addCheckpointAndSubsumeOldest(checkpoint, epoch, numRetained);
      }
    }
    const store = new SlowStore();
    const g = { ...graph([v('src', 1, { kind: 'source.generate', id: 'g', name: 'g' } as unknown as OperatorSpec)], []), checkpointing: { intervalMs: 1_000 } };
    const checkpoints = {
      store,
      idCounter: new InMemoryCheckpointIdCounter(),
      storage: new InMemoryCheckpointStorage(),
      storageUri: 'memory:///checkpoints/job',
    };
    const { jm, jobStore, clock, deployed, settle, run, fail, of, afterDelay } = await setup(g, { checkpoints });
    await settle();
    await run(of('src')[0]!);
    const metrics: CheckpointMetrics = { bytesPersisted: 1, stateSize: 1, alignmentDurationMs: 0, syncDurationMs: 0, asyncDurationMs: 0, unaligned: false };
    const state = (n: number): TaskStateSnapshot => ({
      operators: {
        'src:0': {
          keyed: [],
          operator: [{ handle: { uri: `memory:///state/src-${n}`, size: 1 }, lists: [{ name: 'source-splits', mode: 'split', count: 1 }] }],
        },
      },
    });
    for (const id of [1, 2]) {
      clock.advance(1_000);
      await settle();
      await jm.acknowledgeCheckpoint(jobId, of('src')[0]!.attemptId, id, metrics, state(id));
      await settle();
    }
    // Checkpoint 2's pointer is being written (its task may be told it completed) when the task fails.
    await fail(of('src')[0]!);
    await afterDelay();
    expect(of('src', 1)).toEqual([]);
    store.release();
    await settle();
    expect(deployed).toHaveLength(2);
    expect(of('src', 1)[0]!.restore).toMatchObject({ checkpointId: 2, state: state(2) });
    // The exception history names the checkpoint the restart restored.
    expect((await jobStore.get(jobId))!.exceptions).toEqual([expect.objectContaining({ message: 'boom', recovered: true, restoredFrom: 2 })]);
  });

  describe('as the successor of a JobMaster that died', () => {
    // src (2) --blocking--> sink (2, collect). The predecessor saw src finish on te-0 (attempts p0, p1) and
    // the sink fail once, so the sink was at attempt 1.
    const g = graph([v('src', 2, seq('src')), v('sink', 2, sinkOp('sink'))], [e('src', 'sink', 'blocking')]);
    const recovery: JobRecovery = {
      attempts: { src: [0, 0], sink: [1, 1] },
      finished: {
        src: [
          { attemptId: 'p0', resourceId: 'te-0' },
          { attemptId: 'p1', resourceId: 'te-0' },
        ],
      },
    };
    const config = { 'heartbeat.interval': 100, 'heartbeat.timeout': 1000 };

    it('keeps a finished region whose partitions its TaskExecutor reports, runs only what had not finished, and releases partitions it does not know', async () => {
      const { jobMaster, deployed, released, register, settle, finish, of } = await setup(g, { taskExecutors: 0, recovery, config });
      await register('te-1', 2);
      await settle();
      // Nothing goes out while te-0, which holds src's output, has not reported.
      expect(deployed).toEqual([]);
      await register('te-0', 0, ['src-sink.0.p0', 'src-sink.1.p1', 'src-sink.0.from-an-older-attempt']);
      await settle();
      expect(deployed.map((t) => `${t.vertexId}#${t.attemptNumber}`)).toEqual(['sink#2', 'sink#2']);
      // The sinks read the partitions the predecessor's producers wrote.
      expect(inputChannelsOf(of('sink', 2)[0]!.inputs[0]!).map((c) => c.partitionId)).toEqual(['src-sink.0.p0', 'src-sink.1.p1']);
      expect(released).toEqual([{ taskExecutor: 'te-0', partitions: ['src-sink.0.from-an-older-attempt'] }]);
      for (const t of of('sink', 2)) await finish(t);
      expect((await jobMaster.termination).status).toBe('FINISHED');
      expect(
        jobMaster
          .snapshot()
          .tasks.filter((t) => t.vertexId === 'src')
          .map((t) => [t.attemptId, t.attemptNumber]),
      ).toEqual([
        ['p0', 0],
        ['p1', 0],
      ]);
    });

    it('reruns a finished region whose TaskExecutor does not come back within the heartbeat timeout, at the next attempt numbers', async () => {
      const { clock, jobMaster, deployed, register, settle, finish, of } = await setup(g, { taskExecutors: 0, recovery, config });
      await register('te-1', 2);
      await settle();
      expect(deployed).toEqual([]);
      for (let waited = 0; waited < 1000; waited += 100) {
        clock.advance(100);
        await settle();
      }
      expect(deployed.map((t) => `${t.vertexId}#${t.attemptNumber}`)).toEqual(['src#1', 'src#1']);
      for (const t of of('src', 1)) await finish(t);
      await settle();
      expect(of('sink', 2)).toHaveLength(2);
      expect(inputChannelsOf(of('sink', 2)[0]!.inputs[0]!).map((c) => c.partitionId)).toEqual(
        of('src', 1).map((t) => `src-sink.${t.subtaskIndex}.${t.attemptId}`),
      );
      for (const t of of('sink', 2)) await finish(t);
      expect((await jobMaster.termination).status).toBe('FINISHED');
    });
  });
});
