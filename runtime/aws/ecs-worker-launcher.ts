// WorkerLauncher on ECS (Fargate): RunTask per worker, StopTask, and exits found by polling
// DescribeTasks. Throttling, missing capacity, ENI provisioning, ECS server errors and lost answers are
// retried with jittered backoff under a client-side rate limit, each RunTask of one launch under one
// clientToken; what retrying cannot fix fails at once, and both end in an EcsLaunchError saying what to
// check (ecs-launch-errors.ts sorts ECS's answers). This file holds a launch's state: its retries and
// capacity-provider fallback, the tasks it tracks, what their statuses mean (exits, relaunches of a task
// that stopped before it ran); ecs-task-request.ts builds each RunTask request, ecs-task-poller.ts
// describes the tracked tasks.
import { randomUUID } from 'node:crypto';
import { ECSClient, ListTasksCommand, RunTaskCommand, StopTaskCommand, type Failure, type Task } from '@aws-sdk/client-ecs';
import type { Clock, Timer } from '../core/clock.js';
import { ConfigurationError, ConflictError, errorMessage, InvalidRequestError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';
import { createLogger, type Logger } from '../core/logger.js';
import type { WorkerExit, WorkerKind, WorkerLauncher, WorkerSpec } from '../protocol/worker-launcher.js';
import { baseClientOptions, withCallLog, type AwsConfig } from './clients.js';
import { classifyEcsFailure, EcsLaunchError, EcsLaunchErrorCode, reportOfError, type EcsFailureClass } from './ecs-launch-errors.js';
import { EcsTaskPoller } from './ecs-task-poller.js';
import { capacityProviderAt, runTaskInput, type EcsNetworkSettings, type RunTaskSettings } from './ecs-task-request.js';
import { sleepOn } from '../core/retry.js';
import { backoffDelayMs, TokenBucket, type BackoffOptions, type TokenBucketOptions } from './rate-limit.js';
import { fargateSizeOfTaskExecutor } from './fargate-sizes.js';

export interface EcsRetrySettings extends BackoffOptions {
  /** A launch that has not succeeded after this long gives up (ms). */
  readonly giveUpAfterMs: number;
  /** ...or after this many RunTask calls. */
  readonly maxAttempts: number;
}

export const DEFAULT_ECS_RETRY: EcsRetrySettings = { initialDelayMs: 1_000, maxDelayMs: 30_000, giveUpAfterMs: 5 * 60_000, maxAttempts: 40 };
/** ECS's own RunTask limit is a burst of 100 and 40 per second per account; stay well below it. */
export const DEFAULT_ECS_RATE_LIMIT: TokenBucketOptions = { capacity: 10, refillPerSecond: 5 };

export interface EcsWorkerLauncherOptions {
  readonly ecs: ECSClient;
  readonly cluster: string;
  /** Task definition (family, family:revision or ARN) per kind of worker; the image's command picks the entry point. */
  readonly taskDefinitions: Partial<Record<WorkerKind, string>>;
  /**
   * Capacity providers per kind of worker, in the order they are tried (e.g. `['FARGATE_SPOT', 'FARGATE']`):
   * RunTask asks the first; once ECS answers that it has no capacity there, the launch moves on to the
   * next one and stays there. They must be associated with the cluster.
   *
   * @default - none: RunTask with the FARGATE launch type
   */
  readonly capacityProviders?: Partial<Record<WorkerKind, readonly string[]>>;
  /** The container the environment overrides go to. @default 'floe' */
  readonly containerName?: string;
  readonly network: EcsNetworkSettings;
  /** Environment for every worker, under each spec's own. */
  readonly env?: Readonly<Record<string, string>>;
  readonly clock: Clock;
  /** @default Math.random */
  readonly random?: () => number;
  /** @default DEFAULT_ECS_RETRY */
  readonly retry?: Partial<EcsRetrySettings>;
  /** Client-side limit over every ECS call of this launcher. @default DEFAULT_ECS_RATE_LIMIT */
  readonly rateLimit?: TokenBucketOptions;
  /** How often running tasks are described to notice exits (ms). @default 2000 */
  readonly pollIntervalMs?: number;
  /**
   * Poll for exits. A Lambda function that only launches JobManagers turns this off: it does not live
   * long enough to watch them, and the JobManager's lease tells whether it still runs. @default true
   */
  readonly watchExits?: boolean;
  /** How long stop() waits for ECS to report STOPPED before it gives up waiting (ms). @default 120000 */
  readonly stopTimeoutMs?: number;
  readonly logger?: Logger;
}

interface TrackedTask {
  readonly spec: WorkerSpec;
  arn?: string;
  lastStatus?: string;
  reachedRunning: boolean;
  /** Launch attempts so far, across relaunches after a start-up failure. */
  attempts: number;
  readonly firstAttemptAtMs: number;
  stopReason?: string;
  readonly gone: Promise<void>;
  markGone: () => void;
  relaunching: boolean;
  /**
   * RunTask's idempotency token for this logical launch: every retry that may follow a lost answer sends
   * it again, so ECS returns the task it already started instead of starting a second one. A relaunch
   * after the task stopped is a new launch with a new token.
   */
  clientToken: string;
  /** Whether a RunTask with the current token got no clear answer, so a task may exist under it. */
  tokenInDoubt: boolean;
  /** Index into the kind's capacity providers of the one RunTask asks. */
  providerIndex: number;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** ECS takes up to 64 ASCII characters (33-126) and remembers a RunTask token for up to 24 hours. */
function newClientToken(): string {
  return randomUUID();
}

/**
 * An ECS client whose own retries are off: the launcher paces and retries itself, and counts what it did.
 * The SDK's HTTP handler only warns when `requestTimeout` passes; `socketTimeout` is the inactivity
 * deadline that ends the call, so a RunTask whose answer never comes fails and is retried under its token.
 */
export function createEcsClient(config: AwsConfig): ECSClient {
  const base = baseClientOptions(config);
  return withCallLog(
    new ECSClient({ ...base, maxAttempts: 1, requestHandler: { ...base.requestHandler, socketTimeout: base.requestHandler.requestTimeout } }),
    config,
  );
}

export class EcsWorkerLauncher implements WorkerLauncher {
  private readonly tasks = new Map<string, TrackedTask>();
  private readonly listeners = new Set<(exit: WorkerExit) => void>();
  private readonly bucket: TokenBucket;
  private readonly retry: EcsRetrySettings;
  private readonly containerName: string;
  /** What every RunTask of this launcher shares. */
  private readonly request: RunTaskSettings;
  /** Describes the tracked tasks to notice their exits. */
  private readonly poller: EcsTaskPoller<TrackedTask>;
  private readonly random: () => number;
  private readonly log: Logger;
  private closed = false;

  constructor(private readonly options: EcsWorkerLauncherOptions) {
    this.bucket = new TokenBucket(options.clock, options.rateLimit ?? DEFAULT_ECS_RATE_LIMIT);
    this.retry = { ...DEFAULT_ECS_RETRY, ...options.retry };
    this.containerName = options.containerName ?? 'floe';
    this.request = {
      cluster: options.cluster,
      containerName: this.containerName,
      network: options.network,
      ...(options.env !== undefined ? { env: options.env } : {}),
    };
    this.random = options.random ?? Math.random;
    this.log = (options.logger ?? createLogger({})).child({ component: 'ecs-launcher', cluster: options.cluster });
    this.poller = new EcsTaskPoller<TrackedTask>({
      ecs: options.ecs,
      cluster: options.cluster,
      clock: options.clock,
      intervalMs: options.pollIntervalMs ?? 2_000,
      rateLimit: this.bucket,
      log: this.log,
      watched: () => {
        const byArn = new Map<string, TrackedTask>();
        for (const t of this.tasks.values()) if (t.arn !== undefined && !t.relaunching) byArn.set(t.arn, t);
        return byArn;
      },
      keepPolling: () => this.tasks.size > 0,
      // A task relaunched while the call was under way has another ARN now.
      onDescribed: (task, described) => {
        if (task.arn === described.taskArn) this.observe(task, described);
      },
      onMissing: (task, arn) => this.exited(task, null, `the ECS task ${arn} is gone (MISSING)`),
    });
    if (options.network.subnets.length === 0)
      throw new ConfigurationError(`ECS tasks need at least one subnet (awsvpc network mode); set ${FloeEnv.ECS_SUBNETS}`);
  }

  async start(spec: WorkerSpec): Promise<void> {
    if (this.closed) throw new ConflictError(`the ECS launcher is closed; cannot start ${spec.id}`);
    if (typeof spec.id !== 'string' || !ID_PATTERN.test(spec.id)) {
      throw new InvalidRequestError(`worker id must match ${ID_PATTERN} (it becomes the task's startedBy), found ${JSON.stringify(spec.id)}`);
    }
    if (this.tasks.has(spec.id)) throw new ConflictError(`worker ${spec.id} is already running; stop it first or pick another id`);
    if (spec.resources !== undefined && fargateSizeOfTaskExecutor(spec.resources.profile, spec.resources.slots) === undefined) {
      const { profile, slots } = spec.resources;
      throw new InvalidRequestError(
        `worker ${spec.id}: no Fargate task holds ${slots} slots of { cpu: ${profile.cpu}, memoryMiB: ${profile.memoryMiB} } (${profile.cpu * slots} vCPUs, ${profile.memoryMiB * slots} MiB)`,
      );
    }
    this.taskDefinitionFor(spec.kind);
    let markGone!: () => void;
    const gone = new Promise<void>((resolve) => (markGone = resolve));
    const task: TrackedTask = {
      spec,
      reachedRunning: false,
      attempts: 0,
      firstAttemptAtMs: this.options.clock.now(),
      gone,
      markGone,
      relaunching: false,
      clientToken: newClientToken(),
      tokenInDoubt: false,
      providerIndex: 0,
    };
    this.tasks.set(spec.id, task);
    try {
      await this.launch(task);
    } catch (error) {
      this.tasks.delete(spec.id);
      markGone();
      throw error;
    }
    if (this.options.watchExits === false) {
      // Nothing here will ever hear it stop (ECS events do): keeping it would only make stop() and close()
      // wait for an exit that is never reported. A later stop finds it through ListTasks.
      this.tasks.delete(spec.id);
      markGone();
      return;
    }
    this.poller.schedule();
  }

  async stop(id: string, reason: string): Promise<void> {
    const task = this.tasks.get(id);
    if (task === undefined) {
      // Not started by this instance (a Lambda function stopping what another invocation launched).
      await this.stopUntracked(id, reason);
      return;
    }
    if (task.stopReason === undefined) {
      task.stopReason = reason;
      this.log.info('stopping worker', { workerId: id, taskArn: task.arn, reason });
      if (task.arn !== undefined) await this.stopTask(task.arn, reason);
    }
    const timeoutMs = this.options.stopTimeoutMs ?? 120_000;
    let timer: Timer | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = this.options.clock.setTimeout(() => resolve('timeout'), timeoutMs)));
    const outcome = await Promise.race([task.gone.then(() => 'gone' as const), timedOut]);
    timer?.cancel();
    if (outcome === 'timeout' && this.tasks.get(id) === task) {
      this.log.warn('ECS did not report the task STOPPED in time; forgetting it', { workerId: id, taskArn: task.arn, timeoutMs });
      this.exited(task, null, `stopped: ${reason} (ECS did not confirm STOPPED within ${timeoutMs} ms)`);
    }
  }

  onExit(listener: (exit: WorkerExit) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  running(): string[] {
    return [...this.tasks.keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.tasks.keys()].map((id) => this.stop(id, 'launcher closed')));
    this.closed = true;
    this.poller.stop();
  }

  // ---- launching ---------------------------------------------------------------------------------

  private taskDefinitionFor(kind: WorkerKind): string {
    const taskDefinition = this.options.taskDefinitions[kind];
    if (taskDefinition === undefined || taskDefinition === '') {
      throw new ConfigurationError(
        `no ECS task definition is configured for ${kind} workers; set ${kind === 'jobmanager' ? FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER : FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR}`,
      );
    }
    return taskDefinition;
  }

  /** RunTask until it gives a task, retrying what can clear, within the attempt and time budget. */
  private async launch(task: TrackedTask): Promise<void> {
    const { spec } = task;
    const taskDefinition = this.taskDefinitionFor(spec.kind);
    let retriesHere = 0;
    for (;;) {
      if (task.stopReason !== undefined || this.closed) {
        await this.stopLaunchedInDoubt(task, task.stopReason ?? 'launcher closed');
        throw new EcsLaunchError(
          EcsLaunchErrorCode.STOPPED_BEFORE_START,
          `worker ${spec.id} was stopped (${task.stopReason ?? 'launcher closed'}) before ECS gave it a task`,
          { retryable: false },
        );
      }
      await this.bucket.take();
      task.attempts++;
      let failure: EcsFailureClass;
      let cause: unknown;
      try {
        const out = await this.options.ecs.send(
          new RunTaskCommand(runTaskInput(this.request, spec, taskDefinition, { clientToken: task.clientToken, capacityProvider: this.providerOf(task) })),
        );
        const started = out.tasks?.[0];
        if (started?.taskArn !== undefined && (out.failures ?? []).length === 0) {
          task.arn = started.taskArn;
          task.lastStatus = started.lastStatus;
          this.log.info('worker task started', {
            workerId: spec.id,
            kind: spec.kind,
            taskArn: started.taskArn,
            attempts: task.attempts,
            clientToken: task.clientToken,
          });
          if (task.stopReason !== undefined) await this.stopTask(started.taskArn, task.stopReason);
          return;
        }
        const first: Failure | undefined = out.failures?.[0];
        failure = classifyEcsFailure({
          failureReason: first?.reason ?? 'no task and no failure in the answer',
          ...(first?.detail !== undefined ? { failureDetail: first.detail } : {}),
          ...(this.providerOf(task) !== undefined ? { capacityProvider: this.providerOf(task)! } : {}),
        });
        this.renewTokenUnlessInDoubt(task);
      } catch (error) {
        cause = error;
        const report = reportOfError(error);
        failure = classifyEcsFailure({ ...report, ...(this.providerOf(task) !== undefined ? { capacityProvider: this.providerOf(task)! } : {}) });
        // A 4xx is ECS refusing the request: nothing started. Anything else (no answer, a 5xx) may have
        // followed a started task, so the token stays for every later try of this launch.
        if (report.httpStatus !== undefined && report.httpStatus >= 400 && report.httpStatus < 500) this.renewTokenUnlessInDoubt(task);
        else task.tokenInDoubt = true;
      }
      const elapsedMs = this.options.clock.now() - task.firstAttemptAtMs;
      if (failure.code === EcsLaunchErrorCode.CAPACITY_UNAVAILABLE || failure.code === EcsLaunchErrorCode.QUOTA_EXCEEDED)
        this.fallBackToNextProvider(task, failure);
      if (!failure.retryable) {
        await this.stopLaunchedInDoubt(task, `launch failed: ${failure.code}`);
        throw new EcsLaunchError(
          failure.code,
          `ECS refused to start ${spec.kind} worker ${spec.id} with task definition '${taskDefinition}' on cluster '${this.options.cluster}': ${failure.text}; ${failure.hint}`,
          { retryable: false, cause },
        );
      }
      const delayMs = backoffDelayMs(retriesHere++, this.retry, this.random);
      if (task.attempts >= this.retry.maxAttempts || elapsedMs + delayMs > this.retry.giveUpAfterMs) {
        await this.stopLaunchedInDoubt(task, `launch gave up: ${failure.code}`);
        throw this.gaveUp(task, taskDefinition, failure, elapsedMs, cause);
      }
      this.log.warn('RunTask did not start the worker; retrying', {
        workerId: spec.id,
        code: failure.code,
        reason: failure.text,
        attempt: task.attempts,
        delayMs,
        clientToken: task.clientToken,
      });
      await sleepOn(this.options.clock, delayMs);
    }
  }

  private gaveUp(task: TrackedTask, taskDefinition: string, failure: EcsFailureClass, elapsedMs: number, cause: unknown): EcsLaunchError {
    const who = `${task.spec.kind} worker ${task.spec.id}`;
    const tried = `${task.attempts} attempts over ${Math.round(elapsedMs / 1000)} s (task definition '${taskDefinition}', cluster '${this.options.cluster}'); last answer: ${failure.text}`;
    const headline = (() => {
      switch (failure.code) {
        case EcsLaunchErrorCode.CAPACITY_UNAVAILABLE:
          return `ECS capacity never arrived for ${who}`;
        case EcsLaunchErrorCode.QUOTA_EXCEEDED:
          return `the account's Fargate quota left no room for ${who}`;
        case EcsLaunchErrorCode.ENI_PROVISIONING:
          return `no network interface could be provisioned for ${who}`;
        case EcsLaunchErrorCode.THROTTLED:
          return `ECS kept throttling the launch of ${who}`;
        case EcsLaunchErrorCode.NETWORK:
          return `ECS could not be reached to launch ${who}`;
        default:
          return `ECS could not start ${who}`;
      }
    })();
    return new EcsLaunchError(failure.code, `${headline}: ${tried}; ${failure.hint}`, {
      retryable: false,
      cause,
      details: { attempts: task.attempts, elapsedMs },
    });
  }

  /** After a clear "no task" answer a fresh token is safe, and spares a retry any answer ECS may keep for the old one. */
  private renewTokenUnlessInDoubt(task: TrackedTask): void {
    if (!task.tokenInDoubt) task.clientToken = newClientToken();
  }

  /**
   * A launch that ends without a task while a RunTask of it went unanswered may still have started one:
   * find it by its startedBy and stop it, so no worker runs that nobody tracks.
   */
  private async stopLaunchedInDoubt(task: TrackedTask, reason: string): Promise<void> {
    if (!task.tokenInDoubt) return;
    task.tokenInDoubt = false;
    await this.stopUntracked(task.spec.id, reason);
  }

  /**
   * After ECS said it has no capacity with one provider (Fargate Spot), the next try asks the next one
   * (on-demand Fargate). Not while the token is in doubt: a RunTask under the same token must carry the
   * same request, or ECS could not tell it is the same launch.
   */
  private fallBackToNextProvider(task: TrackedTask, failure: EcsFailureClass): void {
    const providers = this.options.capacityProviders?.[task.spec.kind] ?? [];
    if (task.tokenInDoubt || task.providerIndex >= providers.length - 1) return;
    task.providerIndex++;
    this.log.warn('no capacity or quota left with this capacity provider; the next tries use the next one', {
      workerId: task.spec.id,
      from: providers[task.providerIndex - 1],
      to: providers[task.providerIndex],
      reason: failure.text,
    });
  }

  /** The capacity provider the task's next RunTask asks; undefined with the FARGATE launch type. */
  private providerOf(task: TrackedTask): string | undefined {
    return capacityProviderAt(this.options.capacityProviders?.[task.spec.kind] ?? [], task.providerIndex);
  }

  private async stopTask(arn: string, reason: string): Promise<void> {
    for (let retry = 0; ; retry++) {
      await this.bucket.take();
      try {
        // ECS caps the reason at 255 characters.
        await this.options.ecs.send(new StopTaskCommand({ cluster: this.options.cluster, task: arn, reason: reason.slice(0, 255) }));
        return;
      } catch (error) {
        const failure = classifyEcsFailure(reportOfError(error));
        if (!failure.retryable || retry >= 5) {
          this.log.warn('StopTask failed', { taskArn: arn, error: failure.text });
          return;
        }
        await sleepOn(this.options.clock, backoffDelayMs(retry, this.retry, this.random));
      }
    }
  }

  private async stopUntracked(id: string, reason: string): Promise<void> {
    if (!ID_PATTERN.test(id)) return;
    await this.bucket.take();
    const listed = await this.options.ecs
      .send(new ListTasksCommand({ cluster: this.options.cluster, startedBy: id, desiredStatus: 'RUNNING' }))
      .catch((error: unknown) => {
        this.log.warn('ListTasks failed; cannot stop a worker this launcher did not start', { workerId: id, error: errorMessage(error) });
        return undefined;
      });
    for (const arn of listed?.taskArns ?? []) await this.stopTask(arn, reason);
  }

  // ---- watching ----------------------------------------------------------------------------------

  private observe(task: TrackedTask, described: Task): void {
    if (described.lastStatus !== task.lastStatus) {
      this.log.debug('task status', { workerId: task.spec.id, taskArn: described.taskArn, lastStatus: described.lastStatus });
      task.lastStatus = described.lastStatus;
    }
    if (described.lastStatus === 'RUNNING') task.reachedRunning = true;
    if (described.lastStatus !== 'STOPPED') return;
    const container = described.containers?.find((c) => c.name === this.containerName) ?? described.containers?.[0];
    const exitCode = container?.exitCode ?? null;
    const stoppedReason = described.stoppedReason ?? 'no reason given';
    let advice = '';
    let fatal = false;
    if (task.stopReason === undefined && !task.reachedRunning) {
      // Never ran: ENI, capacity or registry trouble shows up here on Fargate; relaunch within the same budget.
      const failure = classifyEcsFailure({
        failureReason: container?.reason ?? '',
        message: stoppedReason,
        ...(described.stopCode !== undefined ? { stopCode: described.stopCode } : {}),
      });
      if (failure.retryable) {
        void this.relaunch(task, failure);
        return;
      }
      if (exitCode === null) advice = ` (${failure.code}); ${failure.hint}`;
      fatal = failure.code === EcsLaunchErrorCode.IMAGE_PLATFORM_MISMATCH;
    }
    const how = exitCode !== null ? `exited with code ${exitCode} (ECS: ${stoppedReason})` : `stopped by ECS: ${stoppedReason}${advice}`;
    this.exited(task, exitCode, task.stopReason !== undefined ? `stopped: ${task.stopReason} (${how})` : how, fatal);
  }

  private async relaunch(task: TrackedTask, failure: EcsFailureClass): Promise<void> {
    const taskDefinition = this.taskDefinitionFor(task.spec.kind);
    const elapsedMs = this.options.clock.now() - task.firstAttemptAtMs;
    if (task.attempts >= this.retry.maxAttempts || elapsedMs >= this.retry.giveUpAfterMs) {
      this.exited(task, null, this.gaveUp(task, taskDefinition, failure, elapsedMs, undefined).message);
      return;
    }
    this.log.warn('worker task stopped before it ran; launching it again', {
      workerId: task.spec.id,
      code: failure.code,
      reason: failure.text,
      attempts: task.attempts,
    });
    task.relaunching = true;
    task.arn = undefined;
    task.lastStatus = undefined;
    // The stopped task answers for the old token; a new launch needs a new one or ECS would return it again.
    task.clientToken = newClientToken();
    task.tokenInDoubt = false;
    // A Spot task taken back before it ran, or no capacity: the new launch asks the next provider.
    if (failure.code === EcsLaunchErrorCode.CAPACITY_UNAVAILABLE || failure.code === EcsLaunchErrorCode.QUOTA_EXCEEDED)
      this.fallBackToNextProvider(task, failure);
    try {
      await sleepOn(this.options.clock, backoffDelayMs(task.attempts - 1, this.retry, this.random));
      await this.launch(task);
      task.relaunching = false;
    } catch (error) {
      this.exited(task, null, errorMessage(error));
    }
  }

  private exited(task: TrackedTask, exitCode: number | null, reason: string, fatal = false): void {
    if (this.tasks.get(task.spec.id) !== task) return;
    this.tasks.delete(task.spec.id);
    task.markGone();
    const requested = task.stopReason !== undefined;
    const exit: WorkerExit = { id: task.spec.id, kind: task.spec.kind, exitCode, reason, requested, ...(fatal ? { fatal: true as const } : {}) };
    (requested ? this.log.info : this.log.warn)('worker exited', {
      workerId: task.spec.id,
      kind: task.spec.kind,
      taskArn: task.arn,
      exitCode,
      reason,
      requested,
    });
    for (const listener of [...this.listeners]) {
      try {
        listener(exit);
      } catch (error) {
        this.log.error('worker exit listener failed', { workerId: task.spec.id, error });
      }
    }
  }
}
