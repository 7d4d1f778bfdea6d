// A local ECS API (AWS JSON 1.1: RunTask, DescribeTasks, StopTask, ListTasks) that really runs each
// task's command as a process, so the real @aws-sdk/client-ecs client and Floe's ECS launcher can be
// exercised end to end. Also serves a task metadata endpoint (v4) and injects faults on request. Like ECS,
// it honours RunTask's clientToken: the same token with the same request returns the task it started.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const TARGET_PREFIX = 'AmazonEC2ContainerServiceV20141113.';

export interface EmulatedTaskDefinition {
  /** argv of the container's process, e.g. [process.execPath, 'dist/jobmanager.js']. */
  readonly command: readonly string[];
  /** The container's environment before RunTask's overrides. */
  readonly env?: Readonly<Record<string, string>>;
  /** @default 'floe' */
  readonly containerName?: string;
  /** The container's stopTimeout: how long a Spot interruption waits after SIGTERM before SIGKILL (ms). @default 30000, as ECS */
  readonly stopTimeoutMs?: number;
}

export interface EcsEmulatorOptions {
  /** @default 'us-east-1' */
  readonly region?: string;
  /** Each task's stdout and stderr go to `<logDir>/<startedBy>-<first 8 of its id>.log`; dropped when unset. */
  readonly logDir?: string;
  /** Time between SIGTERM and SIGKILL on StopTask (ms). @default 3000 */
  readonly stopGraceMs?: number;
  /**
   * Hears each task stop as EventBridge delivers ECS "Task State Change" events (the detail the
   * Dispatcher function reads): what a deployed cluster's rule sends to the function.
   */
  readonly onTaskStopped?: (event: EcsTaskStateChangeEvent) => void;
  /** Capacity providers associated with every cluster; a RunTask strategy naming another is refused. @default ['FARGATE', 'FARGATE_SPOT'] */
  readonly capacityProviders?: readonly string[];
}

/** An ECS "Task State Change" event as EventBridge delivers it (the fields Floe reads, and a few more). */
export interface EcsTaskStateChangeEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': 'ECS Task State Change';
  readonly source: 'aws.ecs';
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: string[];
  readonly detail: {
    readonly clusterArn: string;
    readonly taskArn: string;
    readonly group: string;
    readonly lastStatus: 'STOPPED';
    readonly stoppedReason: string;
    readonly stopCode: string;
    readonly containers: { readonly exitCode?: number }[];
    readonly overrides: { readonly containerOverrides: { readonly name: string; readonly environment: { readonly name: string; readonly value: string }[] }[] };
  };
}

type LastStatus = 'PROVISIONING' | 'RUNNING' | 'STOPPED';

interface EmulatedTask {
  readonly arn: string;
  readonly id: string;
  readonly cluster: string;
  readonly taskDefinition: string;
  readonly containerName: string;
  readonly startedBy?: string;
  /** RunTask's tags, as ListTagsForResource and DescribeTasks (include TAGS) give them back. */
  readonly tags: readonly { key: string; value: string }[];
  /** The capacity provider RunTask's strategy chose; undefined for the FARGATE launch type. */
  readonly capacityProviderName?: string;
  lastStatus: LastStatus;
  desiredStatus: 'RUNNING' | 'STOPPED';
  readonly createdAtMs: number;
  startedAtMs?: number;
  stoppedAtMs?: number;
  stoppedReason?: string;
  stopCode?: string;
  exitCode?: number;
  process?: ChildProcess;
  /** The container's own temporary folder (its TMPDIR), gone when the task stops, as a container's /tmp is. */
  tmpDir?: string;
  readonly env: Record<string, string>;
  /** RunTask's environment overrides, as events show them. */
  readonly overrides: { name: string; value: string }[];
  readonly exited: Promise<void>;
  markExited: () => void;
}

export interface EcsEmulatorCounters {
  runTask: number;
  runTaskThrottled: number;
  runTaskCapacityFailures: number;
  runTaskStarted: number;
  /** RunTask calls answered with the task an earlier call of the same clientToken started. */
  runTaskReplayed: number;
  /** RunTask calls whose task started but whose answer was dropped (the connection closed instead). */
  runTaskAnswersLost: number;
  describeTasks: number;
  stopTask: number;
  listTasks: number;
  /** When each RunTask call arrived (ms since the epoch), throttled and failed ones included. */
  readonly runTaskTimesMs: number[];
  /** The clientToken of each RunTask call, in order (undefined when the call sent none). */
  readonly runTaskClientTokens: (string | undefined)[];
  /** The capacity provider each RunTask call asked for, in order (undefined for the FARGATE launch type). */
  readonly runTaskCapacityProviders: (string | undefined)[];
  /** The size overrides of each RunTask call that carried any, in order (calls without are not listed). */
  readonly runTaskSizes: EmulatedTaskSize[];
}

/** What a RunTask call asked for beyond the task definition's size: task-level strings, container numbers. */
export interface EmulatedTaskSize {
  readonly startedBy: string | undefined;
  readonly cpu: string | undefined;
  readonly memory: string | undefined;
  readonly containerCpu: number | undefined;
  readonly containerMemory: number | undefined;
}

const fargateRange = (from: number, to: number, step: number): number[] => Array.from({ length: (to - from) / step + 1 }, (_, i) => from + i * step);
/** Fargate's task sizes, written out here on their own so the emulator checks Floe's table rather than repeating it. */
const FARGATE_PAIRS = new Map<number, readonly number[]>([
  [256, [512, 1024, 2048]],
  [512, [1024, 2048, 3072, 4096]],
  [1024, fargateRange(2048, 8192, 1024)],
  [2048, fargateRange(4096, 16384, 1024)],
  [4096, fargateRange(8192, 30720, 1024)],
  [8192, fargateRange(16384, 61440, 4096)],
  [16384, fargateRange(32768, 122880, 8192)],
]);

/** How a task stops before it runs, as DescribeTasks and the STOPPED event report it. */
export interface EmulatedStartFailure {
  readonly stoppedReason: string;
  /** @default 'TaskFailedToStart' */
  readonly stopCode?: string;
}

class ApiError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
    readonly fields: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** One scripted RunTask call: refused with an error, or carried out with its answer lost or held back. */
type RunTaskStep = { readonly fail: ApiError } | { readonly answer: 'lose' } | { readonly answer: 'hold'; readonly ms: number };

/** What a clientToken started: ECS remembers it per cluster and answers a repeat of the same request with it. */
interface TokenRecord {
  readonly request: string;
  readonly arn: string;
}

export class EcsEmulator {
  readonly endpoint: string;
  readonly region: string;
  readonly counters: EcsEmulatorCounters = {
    runTask: 0,
    runTaskThrottled: 0,
    runTaskCapacityFailures: 0,
    runTaskStarted: 0,
    runTaskReplayed: 0,
    runTaskAnswersLost: 0,
    describeTasks: 0,
    stopTask: 0,
    listTasks: 0,
    runTaskTimesMs: [],
    runTaskClientTokens: [],
    runTaskCapacityProviders: [],
    runTaskSizes: [],
  };
  private readonly definitions = new Map<string, EmulatedTaskDefinition>();
  private readonly tasks = new Map<string, EmulatedTask>();
  private readonly capacityFailures = new Map<string, string>();
  private readonly providerCapacityFailures = new Map<string, string>();
  private readonly startFailures = new Map<string, EmulatedStartFailure[]>();
  /** Consumed one per RunTask call, in order; calls with no step left behave normally. */
  private readonly runTaskScript: RunTaskStep[] = [];
  private readonly clientTokens = new Map<string, TokenRecord>();
  private readonly stopGraceMs: number;

  private constructor(
    private readonly server: Server,
    port: number,
    private readonly options: EcsEmulatorOptions,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
    this.region = options.region ?? 'us-east-1';
    this.stopGraceMs = options.stopGraceMs ?? 3_000;
  }

  static async start(options: EcsEmulatorOptions = {}): Promise<EcsEmulator> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const emulator = new EcsEmulator(server, (server.address() as AddressInfo).port, options);
    server.on('request', (req, res) => void emulator.onRequest(req, res));
    return emulator;
  }

  /** Maps a task definition (family name, with or without `:revision`) to the command its container runs. */
  registerTaskDefinition(name: string, definition: EmulatedTaskDefinition): void {
    this.definitions.set(name, definition);
  }

  /** The next `count` RunTask calls are answered with ThrottlingException "Rate exceeded". */
  throttleRunTask(count: number): void {
    this.failNextRunTask('ThrottlingException', 'Rate exceeded', { count });
  }

  /**
   * The next `count` RunTask calls (after those already scripted) are answered with this exception (its
   * `__type`) and message before anything starts, e.g. `('AccessDeniedException', 'User: arn:aws:sts::… is
   * not authorized to perform: ecs:RunTask …')`.
   */
  failNextRunTask(type: string, message: string, options: { count?: number; status?: number } = {}): void {
    for (let i = 0; i < (options.count ?? 1); i++) this.runTaskScript.push({ fail: new ApiError(type, message, options.status ?? 400) });
  }

  /**
   * The next `count` RunTask calls (after those already scripted) are carried out, then the connection
   * closes instead of answering, as when an answer is lost on the way back: the task runs, and the
   * caller sees "socket hang up".
   */
  loseNextRunTaskAnswers(count: number): void {
    for (let i = 0; i < count; i++) this.runTaskScript.push({ answer: 'lose' });
  }

  /** The next RunTask call (after those already scripted) is carried out and answered only after `ms`. */
  holdNextRunTaskAnswer(ms: number): void {
    this.runTaskScript.push({ answer: 'hold', ms });
  }

  /**
   * RunTask for this task definition answers a failure with `reason` until called with null (not
   * undefined, which a default parameter turns into the default).
   */
  failCapacity(
    taskDefinition: string,
    reason: string | null = 'Capacity is unavailable at this time. Please try again later or in a different availability zone',
  ): void {
    if (reason === null) this.capacityFailures.delete(taskDefinition);
    else this.capacityFailures.set(taskDefinition, reason);
  }

  /**
   * RunTask with a strategy choosing this capacity provider (e.g. FARGATE_SPOT) answers a failure with
   * `reason` until called with null (not undefined, which a default parameter turns into the default).
   */
  failCapacityOf(
    capacityProvider: string,
    reason: string | null = 'Capacity is unavailable at this time. Please try again later or in a different availability zone',
  ): void {
    if (reason === null) this.providerCapacityFailures.delete(capacityProvider);
    else this.providerCapacityFailures.set(capacityProvider, reason);
  }

  /**
   * RunTask with a strategy choosing this capacity provider is refused as when the account's Fargate vCPU
   * quota for it is used up (in `failures[]`, as ECS answers it), until `failCapacityOf(provider, null)`.
   */
  exceedQuotaOf(capacityProvider: string): void {
    this.failCapacityOf(capacityProvider, 'You’ve reached the limit on the number of vCPUs you can run concurrently');
  }

  /**
   * Takes a running task back as Fargate Spot does: SIGTERM now, SIGKILL once its task definition's
   * stopTimeout has passed; it stops with stopCode SpotInterruption and "Your Spot Task was interrupted.".
   * Resolves with the container's exit code once it is gone.
   */
  async interruptSpot(taskArn: string): Promise<number | undefined> {
    const task = this.tasks.get(taskArn);
    if (task === undefined) throw new Error(`no task ${taskArn}`);
    if (task.lastStatus === 'STOPPED') throw new Error(`task ${taskArn} has stopped already (${task.stoppedReason ?? 'no reason'})`);
    const stopTimeoutMs = this.definitions.get(task.taskDefinition)?.stopTimeoutMs ?? 30_000;
    await this.stopTask(task, 'Your Spot Task was interrupted.', 'SpotInterruption', stopTimeoutMs);
    return task.exitCode;
  }

  /**
   * The next `count` tasks of this task definition are accepted, then stop before running with Fargate's
   * "Timeout waiting for network interface provisioning to complete."
   */
  failEniProvisioning(taskDefinition: string, count: number): void {
    this.failTaskStarts(taskDefinition, count, { stoppedReason: 'Timeout waiting for network interface provisioning to complete.' });
  }

  /** The next `count` tasks of this task definition are accepted, then stop before running as `failure` says. */
  failTaskStarts(taskDefinition: string, count: number, failure: EmulatedStartFailure): void {
    const queue = this.startFailures.get(taskDefinition) ?? [];
    for (let i = 0; i < count; i++) queue.push(failure);
    this.startFailures.set(taskDefinition, queue);
  }

  /** pids of task processes still alive. */
  livePids(): number[] {
    return [...this.tasks.values()].flatMap((t) =>
      t.process?.pid !== undefined && t.process.exitCode === null && t.process.signalCode === null ? [t.process.pid] : [],
    );
  }

  taskSummaries(): {
    arn: string;
    taskDefinition: string;
    startedBy?: string;
    lastStatus: LastStatus;
    exitCode?: number;
    stoppedReason?: string;
    pid?: number;
    capacityProviderName?: string;
  }[] {
    return [...this.tasks.values()].map((t) => ({
      arn: t.arn,
      taskDefinition: t.taskDefinition,
      lastStatus: t.lastStatus,
      ...(t.capacityProviderName !== undefined ? { capacityProviderName: t.capacityProviderName } : {}),
      ...(t.process?.pid !== undefined ? { pid: t.process.pid } : {}),
      ...(t.startedBy !== undefined ? { startedBy: t.startedBy } : {}),
      ...(t.exitCode !== undefined ? { exitCode: t.exitCode } : {}),
      ...(t.stoppedReason !== undefined ? { stoppedReason: t.stoppedReason } : {}),
    }));
  }

  /** Stops every task (SIGTERM, then SIGKILL) and the server. */
  async close(): Promise<void> {
    await Promise.all([...this.tasks.values()].map((t) => this.stopTask(t, 'emulator closed', 'UserInitiated')));
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ---- HTTP --------------------------------------------------------------------------------------

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const url = req.url ?? '/';
    if (req.method === 'GET' && url.startsWith('/v4/')) {
      this.metadata(url, res);
      return;
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    try {
      if (req.method !== 'POST' || !target.startsWith(TARGET_PREFIX))
        throw new ApiError('UnknownOperationException', `expected POST with X-Amz-Target ${TARGET_PREFIX}<Operation>, found ${req.method} '${target}'`);
      const input = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
      const operation = target.slice(TARGET_PREFIX.length);
      let output: unknown;
      switch (operation) {
        case 'RunTask': {
          const step = this.runTaskScript.shift();
          if (step !== undefined && 'fail' in step) {
            if (step.fail.type === 'ThrottlingException') this.counters.runTaskThrottled++;
            this.recordRunTask(input);
            throw step.fail;
          }
          output = this.runTask(input);
          if (step?.answer === 'lose') {
            this.counters.runTaskAnswersLost++;
            req.socket.destroy();
            return;
          }
          if (step?.answer === 'hold') await new Promise((resolve) => setTimeout(resolve, step.ms));
          break;
        }
        case 'DescribeTasks':
          output = this.describeTasks(input);
          break;
        case 'StopTask':
          output = await this.stopTaskCall(input);
          break;
        case 'ListTasks':
          output = this.listTasks(input);
          break;
        case 'ListTagsForResource': {
          const task = this.tasks.get(String(input['resourceArn']));
          if (task === undefined) throw new ApiError('InvalidParameterException', 'The specified task is not found.');
          output = { tags: task.tags };
          break;
        }
        default:
          throw new ApiError('UnknownOperationException', `the emulator does not implement ${operation}`);
      }
      this.reply(res, 200, output);
    } catch (error) {
      const e = error instanceof ApiError ? error : new ApiError('ServerException', (error as Error).message, 500);
      res.setHeader('x-amzn-errortype', e.type);
      this.reply(res, e.status, { __type: e.type, message: e.message, ...e.fields });
    }
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/x-amz-json-1.1',
      'content-length': Buffer.byteLength(text),
      'x-amzn-requestid': randomBytes(8).toString('hex'),
    });
    res.end(text);
  }

  private metadata(url: string, res: ServerResponse): void {
    const id = url.split('/')[2] ?? '';
    const task = [...this.tasks.values()].find((t) => t.id === id);
    if (task === undefined) {
      res.writeHead(404).end();
      return;
    }
    const network = { NetworkMode: 'awsvpc', IPv4Addresses: ['127.0.0.1'] };
    const container = { Name: task.containerName, DockerId: task.id, Networks: [network] };
    const body = url.endsWith('/task') ? { Cluster: task.cluster, TaskARN: task.arn, Family: task.taskDefinition, Containers: [container] } : container;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  // ---- operations --------------------------------------------------------------------------------

  private recordRunTask(input: Record<string, unknown>): void {
    this.counters.runTask++;
    this.counters.runTaskTimesMs.push(Date.now());
    this.counters.runTaskClientTokens.push(typeof input['clientToken'] === 'string' ? input['clientToken'] : undefined);
    const strategy = input['capacityProviderStrategy'] as { capacityProvider?: unknown }[] | undefined;
    this.counters.runTaskCapacityProviders.push(typeof strategy?.[0]?.capacityProvider === 'string' ? strategy[0].capacityProvider : undefined);
    const o = input['overrides'] as { cpu?: unknown; memory?: unknown; containerOverrides?: { cpu?: unknown; memory?: unknown }[] } | undefined;
    const c = o?.containerOverrides?.[0];
    if (o?.cpu !== undefined || o?.memory !== undefined || c?.cpu !== undefined || c?.memory !== undefined) {
      this.counters.runTaskSizes.push({
        startedBy: typeof input['startedBy'] === 'string' ? input['startedBy'] : undefined,
        cpu: typeof o?.cpu === 'string' ? o.cpu : undefined,
        memory: typeof o?.memory === 'string' ? o.memory : undefined,
        containerCpu: typeof c?.cpu === 'number' ? c.cpu : undefined,
        containerMemory: typeof c?.memory === 'number' ? c.memory : undefined,
      });
    }
  }

  /** As Fargate: a task size override must be a valid pair, given as strings, and hold its container's. */
  private checkSize(input: Record<string, unknown>): void {
    const o = input['overrides'] as { cpu?: unknown; memory?: unknown; containerOverrides?: { cpu?: unknown; memory?: unknown }[] } | undefined;
    if (o === undefined || (o.cpu === undefined && o.memory === undefined)) return;
    if (typeof o.cpu !== 'string' || typeof o.memory !== 'string') {
      throw new ApiError('ClientException', 'Task-level cpu and memory overrides must both be given, as strings.');
    }
    const cpu = Number(o.cpu);
    const memory = Number(o.memory);
    if (!(FARGATE_PAIRS.get(cpu) ?? []).includes(memory)) throw new ApiError('ClientException', 'No Fargate configuration exists for given values.');
    for (const c of o.containerOverrides ?? []) {
      if ((typeof c.cpu === 'number' && c.cpu > cpu) || (typeof c.memory === 'number' && c.memory > memory)) {
        throw new ApiError('ClientException', 'The container cpu and memory overrides must not exceed the task cpu and memory.');
      }
    }
  }

  /**
   * The capacity provider a RunTask lands on: none for the FARGATE launch type, else the strategy's
   * provider with the highest weight (the emulator starts one task per call). As ECS, it refuses both at
   * once, neither, and providers not associated with the cluster.
   */
  private capacityProviderOf(input: Record<string, unknown>): string | undefined {
    const strategy = input['capacityProviderStrategy'] as { capacityProvider?: unknown; weight?: unknown; base?: unknown }[] | undefined;
    if (strategy !== undefined && input['launchType'] !== undefined) {
      throw new ApiError(
        'InvalidParameterException',
        'Specifying both a launch type and capacity provider strategy is not supported. Remove one and try again.',
      );
    }
    if (strategy === undefined) {
      if (input['launchType'] !== 'FARGATE')
        throw new ApiError('InvalidParameterException', `the emulator runs FARGATE tasks only, found launchType ${String(input['launchType'])}`);
      return undefined;
    }
    const associated = this.options.capacityProviders ?? ['FARGATE', 'FARGATE_SPOT'];
    if (!Array.isArray(strategy) || strategy.length === 0 || strategy.length > 6) {
      throw new ApiError('InvalidParameterException', 'capacityProviderStrategy must hold 1 to 6 capacity providers.');
    }
    for (const item of strategy) {
      if (typeof item.capacityProvider !== 'string' || !associated.includes(item.capacityProvider)) {
        throw new ApiError(
          'InvalidParameterException',
          'The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster. Associate the capacity provider with the cluster or specify a valid capacity provider and try again.',
        );
      }
    }
    const weight = (item: { weight?: unknown }): number => (typeof item.weight === 'number' ? item.weight : 0);
    if (strategy.every((item) => weight(item) === 0))
      throw new ApiError('InvalidParameterException', 'At least one capacity provider in the strategy must have a weight greater than zero.');
    return [...strategy].sort((a, b) => weight(b) - weight(a))[0]!.capacityProvider as string;
  }

  private runTask(input: Record<string, unknown>): unknown {
    this.recordRunTask(input);
    const clientToken = typeof input['clientToken'] === 'string' ? input['clientToken'] : undefined;
    const cluster = String(input['cluster'] ?? 'default');
    if (clientToken !== undefined && !/^[\x21-\x7e]{1,64}$/.test(clientToken)) {
      throw new ApiError('InvalidParameterException', 'clientToken must be 1 to 64 ASCII characters in the range 33-126.');
    }
    const taskDefinition = String(input['taskDefinition'] ?? '');
    const family = taskDefinition.replace(/^arn:.*:task-definition\//, '').replace(/:\d+$/, '');
    const definition = this.definitions.get(family);
    if (definition === undefined) throw new ApiError('ClientException', `TaskDefinition not found: ${taskDefinition}`);
    const capacityProviderName = this.capacityProviderOf(input);
    this.checkSize(input);
    const vpc = (input['networkConfiguration'] as { awsvpcConfiguration?: { subnets?: unknown[] } } | undefined)?.awsvpcConfiguration;
    if (vpc?.subnets === undefined || vpc.subnets.length === 0)
      throw new ApiError('InvalidParameterException', "Network Configuration must be provided when networkMode 'awsvpc' is specified.");
    // Idempotency is per cluster, and a token started at most one task: the same request gets that task back.
    const tokenKey = clientToken !== undefined ? `${cluster}\u0000${clientToken}` : undefined;
    const request: Record<string, unknown> = { ...input };
    delete request['clientToken'];
    const earlier = tokenKey !== undefined ? this.clientTokens.get(tokenKey) : undefined;
    if (earlier !== undefined) {
      if (earlier.request !== JSON.stringify(request)) {
        throw new ApiError(
          'ConflictException',
          'The RunTask request could not be processed due to conflicts. The provided clientToken is already in use with a different RunTask request.',
          400,
          { resourceIds: [earlier.arn] },
        );
      }
      this.counters.runTaskReplayed++;
      return { tasks: [this.describe(this.tasks.get(earlier.arn)!)], failures: [] };
    }
    const capacity =
      this.capacityFailures.get(family) ?? (capacityProviderName !== undefined ? this.providerCapacityFailures.get(capacityProviderName) : undefined);
    if (capacity !== undefined) {
      this.counters.runTaskCapacityFailures++;
      return { tasks: [], failures: [{ arn: `arn:aws:ecs:${this.region}:000000000000:task-definition/${family}`, reason: capacity }] };
    }
    const containerName = definition.containerName ?? 'floe';
    const overrides =
      (input['overrides'] as { containerOverrides?: { name?: string; environment?: { name: string; value: string }[] }[] } | undefined)?.containerOverrides ??
      [];
    const env: Record<string, string> = { ...definition.env };
    const overridden: { name: string; value: string }[] = [];
    for (const o of overrides) {
      if (o.name !== containerName)
        throw new ApiError('InvalidParameterException', `Override for container named ${o.name} is not a container in the TaskDefinition.`);
      for (const { name, value } of o.environment ?? []) {
        env[name] = value;
        overridden.push({ name, value });
      }
    }
    const id = randomBytes(16).toString('hex');
    const arn = `arn:aws:ecs:${this.region}:000000000000:task/${cluster}/${id}`;
    let markExited!: () => void;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const task: EmulatedTask = {
      arn,
      id,
      cluster,
      taskDefinition: family,
      containerName,
      lastStatus: 'PROVISIONING',
      desiredStatus: 'RUNNING',
      createdAtMs: Date.now(),
      env,
      overrides: overridden,
      exited,
      markExited,
      tags: tagsOf(input),
      ...(typeof input['startedBy'] === 'string' ? { startedBy: input['startedBy'] } : {}),
      ...(capacityProviderName !== undefined ? { capacityProviderName } : {}),
    };
    this.tasks.set(arn, task);
    if (tokenKey !== undefined) this.clientTokens.set(tokenKey, { request: JSON.stringify(request), arn });
    this.counters.runTaskStarted++;
    const startFailure = this.startFailures.get(family)?.shift();
    if (startFailure !== undefined) {
      setTimeout(() => this.stopped(task, null, startFailure.stoppedReason, startFailure.stopCode ?? 'TaskFailedToStart'), 20);
    } else {
      this.launch(task, definition);
    }
    return { tasks: [this.describe(task)], failures: [] };
  }

  private launch(task: EmulatedTask, definition: EmulatedTaskDefinition): void {
    const [command, ...args] = definition.command;
    let logFd: number | 'ignore' = 'ignore';
    if (this.options.logDir !== undefined) {
      mkdirSync(this.options.logDir, { recursive: true });
      logFd = openSync(join(this.options.logDir, `${task.startedBy ?? 'task'}-${task.id.slice(0, 8)}.log`), 'a');
    }
    // A temporary folder of the task's own: what a killed process leaves there (a sink's local part file)
    // goes when the task stops, as it would with its container.
    const tmp = (task.tmpDir = mkdtempSync(join(tmpdir(), 'floe-ecs-task-')));
    try {
      // The IPC channel lets Floe's processes notice the test process dying (installParentWatch).
      const child = spawn(command!, args, {
        env: { ...process.env, ...task.env, ECS_CONTAINER_METADATA_URI_V4: `${this.endpoint}/v4/${task.id}`, AWS_REGION: this.region, TMPDIR: tmp },
        stdio: ['ignore', logFd, logFd, 'ipc'],
      });
      task.process = child;
      child.channel?.unref();
      child.once('spawn', () => {
        if (task.lastStatus === 'PROVISIONING') {
          task.lastStatus = 'RUNNING';
          task.startedAtMs = Date.now();
        }
      });
      child.once('error', (error) => this.stopped(task, null, `CannotStartContainerError: ${error.message}`, 'TaskFailedToStart'));
      child.once('exit', (code) =>
        this.stopped(task, code, task.stoppedReason ?? 'Essential container in task exited', task.stopCode ?? 'EssentialContainerExited'),
      );
    } finally {
      if (typeof logFd === 'number') closeSync(logFd);
    }
  }

  private stopped(task: EmulatedTask, code: number | null, reason: string, stopCode: string): void {
    if (task.lastStatus === 'STOPPED') return;
    task.lastStatus = 'STOPPED';
    task.desiredStatus = 'STOPPED';
    task.stoppedAtMs = Date.now();
    task.stoppedReason = reason;
    task.stopCode = stopCode;
    // A container killed by a signal reports 128 + signal number, as Docker does.
    if (code !== null) task.exitCode = code;
    else if (task.process?.signalCode === 'SIGKILL') task.exitCode = 137;
    else if (task.process?.signalCode === 'SIGTERM') task.exitCode = 143;
    task.markExited();
    if (task.tmpDir !== undefined) rmSync(task.tmpDir, { recursive: true, force: true });
    this.options.onTaskStopped?.({
      version: '0',
      id: randomBytes(8).toString('hex'),
      'detail-type': 'ECS Task State Change',
      source: 'aws.ecs',
      account: '000000000000',
      time: new Date(task.stoppedAtMs).toISOString(),
      region: this.region,
      resources: [task.arn],
      detail: {
        clusterArn: `arn:aws:ecs:${this.region}:000000000000:cluster/${task.cluster}`,
        taskArn: task.arn,
        group: `family:${task.taskDefinition}`,
        lastStatus: 'STOPPED',
        stoppedReason: reason,
        stopCode,
        containers: [task.exitCode !== undefined ? { exitCode: task.exitCode } : {}],
        overrides: { containerOverrides: [{ name: task.containerName, environment: task.overrides }] },
      },
    });
  }

  private describe(task: EmulatedTask): Record<string, unknown> {
    const s = (ms: number | undefined): number | undefined => (ms === undefined ? undefined : ms / 1000);
    return {
      taskArn: task.arn,
      clusterArn: `arn:aws:ecs:${this.region}:000000000000:cluster/${task.cluster}`,
      taskDefinitionArn: `arn:aws:ecs:${this.region}:000000000000:task-definition/${task.taskDefinition}:1`,
      lastStatus: task.lastStatus,
      desiredStatus: task.desiredStatus,
      launchType: 'FARGATE',
      ...(task.capacityProviderName !== undefined ? { capacityProviderName: task.capacityProviderName } : {}),
      createdAt: s(task.createdAtMs),
      ...(task.startedAtMs !== undefined ? { startedAt: s(task.startedAtMs) } : {}),
      ...(task.stoppedAtMs !== undefined ? { stoppedAt: s(task.stoppedAtMs), stoppedReason: task.stoppedReason, stopCode: task.stopCode } : {}),
      ...(task.startedBy !== undefined ? { startedBy: task.startedBy } : {}),
      containers: [
        {
          name: task.containerName,
          lastStatus: task.lastStatus,
          ...(task.exitCode !== undefined ? { exitCode: task.exitCode } : {}),
          networkInterfaces: [{ privateIpv4Address: '127.0.0.1' }],
        },
      ],
    };
  }

  private findTask(cluster: unknown, ref: unknown): EmulatedTask | undefined {
    const r = String(ref);
    return this.tasks.get(r) ?? [...this.tasks.values()].find((t) => t.id === r && (cluster === undefined || t.cluster === cluster));
  }

  private describeTasks(input: Record<string, unknown>): unknown {
    this.counters.describeTasks++;
    const refs = Array.isArray(input['tasks']) ? input['tasks'] : [];
    if (refs.length > 100) throw new ApiError('InvalidParameterException', 'Tasks cannot be longer than 100.');
    const tasks: unknown[] = [];
    const failures: unknown[] = [];
    for (const ref of refs) {
      const task = this.findTask(input['cluster'], ref);
      if (task === undefined) failures.push({ arn: String(ref), reason: 'MISSING' });
      else tasks.push({ ...this.describe(task), ...(Array.isArray(input['include']) && input['include'].includes('TAGS') ? { tags: task.tags } : {}) });
    }
    return { tasks, failures };
  }

  private async stopTaskCall(input: Record<string, unknown>): Promise<unknown> {
    this.counters.stopTask++;
    const task = this.findTask(input['cluster'], input['task']);
    if (task === undefined) throw new ApiError('InvalidParameterException', `The referenced task was not found.`);
    void this.stopTask(task, typeof input['reason'] === 'string' ? input['reason'] : 'Task stopped by user', 'UserInitiated');
    return { task: this.describe(task) };
  }

  private async stopTask(task: EmulatedTask, reason: string, stopCode: string, graceMs = this.stopGraceMs): Promise<void> {
    if (task.lastStatus === 'STOPPED') return;
    task.desiredStatus = 'STOPPED';
    task.stoppedReason ??= reason;
    task.stopCode ??= stopCode;
    const child = task.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
      this.stopped(task, child?.exitCode ?? null, reason, stopCode);
      return;
    }
    child.kill('SIGTERM');
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await task.exited;
    clearTimeout(force);
  }

  private listTasks(input: Record<string, unknown>): unknown {
    this.counters.listTasks++;
    const desired = (input['desiredStatus'] as string | undefined) ?? 'RUNNING';
    const arns = [...this.tasks.values()]
      .filter((t) => (input['cluster'] === undefined || t.cluster === input['cluster']) && t.desiredStatus === desired)
      .filter((t) => input['startedBy'] === undefined || t.startedBy === input['startedBy'])
      .filter((t) => input['family'] === undefined || t.taskDefinition === input['family'])
      .map((t) => t.arn);
    return { taskArns: arns };
  }
}

/** RunTask's tags, refused as ECS refuses them (at most 50; key 1-128, value 0-256 characters; no aws: prefix). */
function tagsOf(input: Record<string, unknown>): { key: string; value: string }[] {
  const raw = input['tags'];
  if (raw === undefined) return [];
  if (!Array.isArray(raw) || raw.length > 50) throw new ApiError('InvalidParameterException', 'Tags must be a list of at most 50 { key, value } objects.');
  return raw.map((t: { key?: unknown; value?: unknown }) => {
    const key = typeof t.key === 'string' ? t.key : '';
    const value = typeof t.value === 'string' ? t.value : '';
    if (key.length < 1 || key.length > 128 || value.length > 256 || !/^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u.test(key + value)) {
      throw new ApiError('InvalidParameterException', `Invalid tag { key: ${JSON.stringify(t.key)}, value: ${JSON.stringify(t.value)} }.`);
    }
    if (/^aws:/i.test(key)) throw new ApiError('InvalidParameterException', 'Tag keys with the aws: prefix are reserved for AWS use.');
    return { key, value };
  });
}
