// A whole cluster inside one process (tests, bench/scale.ts): a JobManagerRunner (ResourceManager +
// JobMaster) on in-memory stores, and TaskExecutors started by the ResourceManager through the
// in-process worker launcher as TaskExecutor objects (their slots are worker threads, or with
// 'taskmanager.slot.mode: light' run on this thread). Everything talks over LocalRpcService, so callers
// can read the RM's, the JM's and every TaskExecutor's own state directly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../core/clock.js';
import { loadConfig, type FloeConfig } from '../core/config.js';
import { JobId, ResourceId } from '../core/ids.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { requireEnv } from '../core/process-env.js';
import { blobKeys } from '../blob/blob-store.js';
import type { JobRecord } from '../ha/job-store.js';
import type { JobGraph } from '../jobgraph/jobgraph.js';
import { JobManagerRunner, type RunnerOutcome } from '../jobmanager/jobmanager-runner.js';
import { InMemoryBlobStore } from '../memory/in-memory-blob-store.js';
import { InMemoryJobStore } from '../memory/in-memory-job-store.js';
import { InMemoryLeaseStore } from '../memory/in-memory-lease-store.js';
import { InProcessWorkerLauncher } from '../memory/in-process-worker-launcher.js';
import { LocalRpcNetwork, LocalRpcService } from '../rpc/local-rpc-service.js';
import { TaskExecutor } from '../taskexecutor/task-executor.js';
import { distEntry } from '../core/paths.js';
import { FloeEnv } from '../core/floe-env.js';

export interface MiniClusterOptions {
  /** Config keys (Flink names) on top of the defaults. */
  readonly config?: Readonly<Record<string, unknown>>;
  /** The lease store every component campaigns in and looks leaders up in. @default a fresh InMemoryLeaseStore */
  readonly leaseStore?: InMemoryLeaseStore;
  readonly logger?: Logger;
  /**
   * The slot worker script, for slots that are worker threads. @default - distEntry('slot-worker') when
   * a TaskExecutor needs it (light slots do not)
   */
  readonly slotWorkerEntry?: string;
}

/** A TaskExecutor the ResourceManager started, with when it stopped (if it did). */
export interface MiniTaskExecutor {
  readonly resourceId: ResourceId;
  readonly taskExecutor: TaskExecutor;
  readonly workDir: string;
  readonly startedAtMs: number;
  stoppedAtMs: number | undefined;
  stopReason: string | undefined;
}

export interface RunningJob {
  readonly jobId: JobId;
  readonly runner: JobManagerRunner;
  readonly outcome: Promise<RunnerOutcome>;
}

export class MiniCluster {
  readonly config: FloeConfig;
  readonly network = new LocalRpcNetwork();
  readonly leaseStore: InMemoryLeaseStore;
  readonly jobStore: InMemoryJobStore;
  readonly blobStore = new InMemoryBlobStore();
  readonly launcher: InProcessWorkerLauncher;
  /** Every TaskExecutor started so far, in start order; stopped ones stay, with their stop time. */
  readonly taskExecutors: MiniTaskExecutor[] = [];
  readonly dir: string;
  private readonly logger: Logger;
  private readonly runners: JobManagerRunner[] = [];
  private readonly rpcs: LocalRpcService[] = [];
  private readonly slotWorkerEntry: string | undefined;

  constructor(options: MiniClusterOptions = {}) {
    this.config = loadConfig(options.config ?? {});
    this.leaseStore = options.leaseStore ?? new InMemoryLeaseStore();
    this.jobStore = new InMemoryJobStore(undefined, this.leaseStore);
    this.logger = options.logger ?? silentLogger;
    this.dir = mkdtempSync(join(tmpdir(), 'floe-mini-'));
    this.slotWorkerEntry = options.slotWorkerEntry;
    this.launcher = new InProcessWorkerLauncher(async (spec) => {
      const resourceId = ResourceId.of(requireEnv(FloeEnv.RESOURCE_ID, spec.env));
      const jobId = JobId.of(requireEnv(FloeEnv.JOB_ID, spec.env));
      const rpc = new LocalRpcService(this.network, resourceId, { timeoutMs: this.config.rpcTimeoutMs });
      const workDir = join(this.dir, 'taskexecutors', resourceId);
      const taskExecutor = await TaskExecutor.start({
        resourceId,
        jobId,
        config: this.config,
        rpc,
        leaseStore: this.leaseStore,
        blobStore: this.blobStore,
        workDir,
        clock: systemClock,
        logger: this.logger,
        ...(this.config.slotMode === 'light' ? {} : { slotWorkerEntry: this.slotWorkerEntry ?? distEntry('slot-worker') }),
      });
      const entry: MiniTaskExecutor = { resourceId, taskExecutor, workDir, startedAtMs: Date.now(), stoppedAtMs: undefined, stopReason: undefined };
      this.taskExecutors.push(entry);
      return {
        stop: (reason) => taskExecutor.stop(reason),
        exited: taskExecutor.terminated.then(async (reason) => {
          entry.stoppedAtMs = Date.now();
          entry.stopReason = reason;
          await rpc.close();
          return 0;
        }),
      };
    });
  }

  static async start(options: MiniClusterOptions = {}): Promise<MiniCluster> {
    return new MiniCluster(options);
  }

  /** Stores the JobGraph (its library must already be in `blobStore`), creates the job record and starts its JobManager. */
  async submit(graph: JobGraph): Promise<RunningJob> {
    const now = Date.now();
    await this.blobStore.put(blobKeys.jobGraph(graph.jobId), Buffer.from(JSON.stringify(graph)));
    await this.jobStore.create({
      jobId: graph.jobId,
      name: graph.name,
      status: 'INITIALIZING',
      epoch: 0,
      submittedAtMs: now,
      updatedAtMs: now,
      jobGraphKey: blobKeys.jobGraph(graph.jobId),
      librarySha256: graph.library.sha256,
      parallelism: Math.max(...graph.vertices.map((v) => v.parallelism)),
      exceptions: [],
      cancelRequested: false,
    });
    const rpc = new LocalRpcService(this.network, `jobmanager-${graph.jobId}`, { timeoutMs: this.config.rpcTimeoutMs });
    this.rpcs.push(rpc);
    const runner = new JobManagerRunner({
      jobId: graph.jobId,
      resourceId: ResourceId.of(`jobmanager-${graph.jobId}`),
      config: this.config,
      rpc,
      leaseStore: this.leaseStore,
      jobStore: this.jobStore,
      blobStore: this.blobStore,
      launcher: this.launcher,
      workerEnv: { [FloeEnv.JOB_ID]: graph.jobId },
      // The in-process cluster has no secret of its own; its TaskExecutors still authenticate data connections with the job's key.
      clusterSecret: 'mini-cluster-secret',
      clock: systemClock,
      logger: this.logger,
    });
    this.runners.push(runner);
    runner.start();
    return { jobId: graph.jobId, runner, outcome: runner.done };
  }

  async record(jobId: JobId): Promise<JobRecord> {
    const r = await this.jobStore.get(jobId);
    if (r === undefined) throw new Error(`job ${jobId} has no record`);
    return r;
  }

  /** The collect sink's records of a FINISHED job. */
  async result(record: JobRecord): Promise<{ records: unknown[]; truncated: boolean }> {
    if (record.resultKey === undefined) throw new Error(`job ${record.jobId} has no result (status ${record.status})`);
    const bytes = await this.blobStore.get(record.resultKey);
    return JSON.parse(Buffer.from(bytes!).toString('utf8')) as { records: unknown[]; truncated: boolean };
  }

  /** Stops every JobManager and TaskExecutor and removes the cluster's files. */
  async close(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.close().catch(() => undefined)));
    await this.launcher.close();
    await Promise.all(this.rpcs.map((r) => r.close()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
