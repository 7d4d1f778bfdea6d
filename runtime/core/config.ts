// One typed configuration object, loaded and validated once at start-up. Keys follow Flink's names
// where a Flink user would look for them; every field carries its unit in its name.
import { CHECKPOINT_OPTIONS } from './checkpoint-options.js';
import { editDistance } from './edit-distance.js';
import { ConfigurationError } from './errors.js';
import { FloeEnv, type FloeEnvKey } from './floe-env.js';

interface OptionSpec {
  readonly key: string;
  readonly default: number | string;
  readonly description: string;
  readonly min?: number;
  readonly max?: number;
  /** A number that may have a fraction (a multiplier, a factor); numbers are integers otherwise. */
  readonly fractional?: boolean;
  /** The values a string option may take. */
  readonly values?: readonly string[];
  /** An environment variable that sets the option too, and wins over FLOE_CONFIG where it is set (deployments use it). */
  readonly env?: FloeEnvKey;
}

/** Every option: its Flink-style key, default and meaning. docs/CONFIGURATION.md lists them (docs/generate-configuration.mjs writes it). */
export const CONFIG_OPTIONS = {
  heartbeatIntervalMs: { key: 'heartbeat.interval', default: 1_000, min: 10, description: 'How often JM→TE, RM→TE and RM→JM heartbeats are sent (ms).' },
  heartbeatTimeoutMs: {
    key: 'heartbeat.timeout',
    default: 10_000,
    min: 50,
    description: 'Silence after which a peer counts as lost (ms). A refused connection or an exited process counts at once.',
  },
  heartbeatRpcFailureThreshold: {
    key: 'heartbeat.rpc-failure-threshold',
    default: 2,
    min: -1,
    description:
      'Consecutive heartbeat calls that fail to reach a peer (connection reset or unreachable, not refused) after which it counts as lost; one failure never does. A refused connection (nothing listens: the process is gone) counts at once. -1 turns the rule off, leaving heartbeat.timeout.',
  },
  rpcTimeoutMs: { key: 'rpc.timeout', default: 10_000, min: 10, description: 'Deadline of every remote call (ms).' },
  leaseDurationMs: {
    key: 'high-availability.lease.duration',
    default: 10_000,
    min: 50,
    description: 'How long a leadership lease lasts without renewal (ms).',
  },
  leaseRenewIntervalMs: {
    key: 'high-availability.lease.renew-interval',
    default: 2_000,
    min: 10,
    description: 'How often the leader renews its lease (ms); keep well below the duration.',
  },
  leaseMaxClockSkewMs: {
    key: 'high-availability.lease.max-clock-skew',
    default: 1_000,
    min: 0,
    env: 'LEASE_MAX_CLOCK_SKEW_MS',
    description:
      "AWS backend: the most two hosts' clocks may disagree (ms); a contender waits this long past a lease's expiry before taking it (runtime/aws/dynamodb-lease-store.ts).",
  },
  taskManagerTimeoutMs: {
    key: 'resourcemanager.taskmanager-timeout',
    default: 30_000,
    min: 0,
    description: 'An idle TaskExecutor (no allocated slot, no unconsumed partition) is stopped after this long (ms).',
  },
  redundantTaskManagers: {
    key: 'slotmanager.redundant-taskmanager-num',
    default: 0,
    min: 0,
    description:
      "TaskExecutors a ResourceManager keeps beyond what its job's slots need, idle and registered, so that when one is lost its tasks are redeployed without waiting for a new one to start (they are not stopped at 'resourcemanager.taskmanager-timeout').",
  },
  taskManagerRegistrationTimeoutMs: {
    key: 'resourcemanager.taskmanager-registration.timeout',
    default: 60_000,
    min: 10,
    description:
      "A TaskExecutor the ResourceManager started (or took from the warm pool) that has not registered this long after its start (hung at start, or its process frozen) is stopped and another is started in its place; three such starts in a row and no more are tried (ms). Keep it below 'slot.request.timeout', and above the longest a TaskExecutor takes to start (an ECS task's image pull).",
  },
  taskManagerDrainTimeoutMs: {
    key: 'taskmanager.drain.timeout',
    default: 110_000,
    min: 0,
    description:
      "How long a TaskExecutor sent SIGTERM (a Spot interruption's two-minute notice, a scale-in) drains before it stops (ms): it takes no new slots, its JobMasters move its running tasks elsewhere (not counted against the restart strategy), and it serves its finished partitions until they are released, then exits 0. A second SIGTERM stops it at once. Keep it below the container's stop timeout (120 s on AWS).",
  },
  slotIdleTimeoutMs: {
    key: 'slot.idle.timeout',
    default: 50_000,
    min: 0,
    description: 'A slot the JobMaster holds but does not use is given back after this long (ms).',
  },
  slotRequestTimeoutMs: {
    key: 'slot.request.timeout',
    default: 120_000,
    min: 10,
    description: 'A job whose slots have not all arrived after this long fails, naming what it asked for and what exists (ms).',
  },
  taskManagerMemoryMiB: {
    key: 'taskmanager.memory.process.size',
    default: 2_048,
    min: 64,
    description:
      "A TaskExecutor's memory when its slots have no resource profile (MiB). What it does not keep for itself ('taskmanager.memory.framework.heap.size') is shared by its slots: each slot's worker thread may hold at most that share of heap, and a task that needs more fails saying it ran out of memory, with the limit. A slot of a resource profile gets the profile's memory instead.",
  },
  taskManagerFrameworkHeapMiB: {
    key: 'taskmanager.memory.framework.heap.size',
    default: 256,
    min: 0,
    description:
      "What a TaskExecutor keeps of 'taskmanager.memory.process.size' for itself (MiB): its own thread's heap (RPC, heartbeats, the data server, buffers between slots).",
  },
  numberOfTaskSlots: {
    key: 'taskmanager.numberOfTaskSlots',
    default: 2,
    min: 1,
    description: "Slots per TaskExecutor; each slot is one worker thread (see 'taskmanager.slot.mode').",
  },
  slotMode: {
    key: 'taskmanager.slot.mode',
    default: 'worker-thread',
    values: ['worker-thread', 'light'],
    description:
      "How a TaskExecutor runs its slots' tasks. worker-thread: one worker thread per slot, so user code cannot block the control plane and a stuck or runaway task can be terminated, with the slot's memory as the thread's heap limit. light: tasks run on the TaskExecutor's own thread (the same task code and messages, no thread), so one TaskExecutor can have thousands of slots; user code then shares the TaskExecutor's thread, heap and environment and a task that ignores cancellation cannot be stopped. Meant for measuring the control plane and for tests.",
  },
  slotThreadReuse: {
    key: 'taskmanager.slot.thread-reuse',
    default: 'when-clean',
    values: ['when-clean', 'never'],
    description:
      "Whether a slot's worker thread runs the next job once its job ended. when-clean: it does if the job left no global, changed built-in, environment variable, process listener, timer or handle behind (each job still gets its own instance of its library's modules), and at most 16 jobs; otherwise, and with never, every job gets fresh threads. A kept thread spares the next job the thread's start and finds the runtime's code compiled.",
  },
  ecsLaunchTimeoutMs: {
    key: 'resourcemanager.ecs.launch.timeout',
    default: 300_000,
    min: 1,
    env: 'ECS_LAUNCH_TIMEOUT_MS',
    description: 'AWS backend: how long a JobManager keeps retrying a TaskExecutor task that ECS refuses for throttling, capacity or network interfaces (ms).',
  },
  ecsLaunchInitialBackoffMs: {
    key: 'resourcemanager.ecs.launch.initial-backoff',
    default: 1_000,
    min: 1,
    env: 'ECS_LAUNCH_BACKOFF_MS',
    description: 'AWS backend: the wait before the first retry of a refused ECS task launch (ms); it doubles per retry, with jitter, up to 30 s.',
  },
  ecsPollIntervalMs: {
    key: 'resourcemanager.ecs.poll-interval',
    default: 2_000,
    min: 1,
    env: 'ECS_POLL_INTERVAL_MS',
    description: 'AWS backend: how often a launcher describes its ECS tasks to notice exits (ms).',
  },
  dispatcherJobManagerLaunchTimeoutMs: {
    key: 'dispatcher.jobmanager.launch.timeout',
    default: 20_000,
    min: 1,
    env: 'ECS_LAUNCH_TIMEOUT_MS',
    description: "AWS backend: how long the Dispatcher function keeps retrying a JobManager task that ECS refuses (ms); it answers within API Gateway's 30 s.",
  },
  artifactUploadTtlS: {
    key: 'rest.artifact-upload.ttl',
    default: 900,
    min: 1,
    env: 'ARTIFACT_UPLOAD_TTL_S',
    description: 'AWS backend: the lifetime of the presigned S3 URLs POST /artifacts answers (s).',
  },
  maxTaskManagers: { key: 'resourcemanager.max-taskmanagers', default: 8, min: 0, description: 'The most TaskExecutors one ResourceManager may run at once.' },
  clusterMaxJobManagers: {
    key: 'cluster.max-jobmanagers',
    default: 4,
    min: 1,
    description: 'The most jobs running at once in the whole cluster, one JobManager each; later jobs wait in line, in submission order.',
  },
  clusterMaxTaskManagers: {
    key: 'cluster.max-taskmanagers',
    default: 8,
    min: 1,
    description:
      'The most TaskExecutors the running jobs may hold together. Each job reserves ceil(slots it needs / taskmanager.numberOfTaskSlots) when it starts; a job needing more than this (or than resourcemanager.max-taskmanagers) is refused at submission.',
  },
  defaultParallelism: { key: 'parallelism.default', default: 2, min: 1, description: 'Parallelism of operators that set none.' },
  restAddress: { key: 'rest.address', default: '127.0.0.1', description: 'Address the local Dispatcher listens on.' },
  restPort: {
    key: 'rest.port',
    default: 0,
    min: 0,
    description: 'Port of the local Dispatcher; 0 picks a free one (the URL is in <state dir>/cluster.json and shown by `floe cluster status`).',
  },
  restMaxContentLengthBytes: {
    key: 'rest.server.max-content-length',
    default: 64 * 1024 * 1024,
    min: 1024,
    description: 'Largest request body the Dispatcher accepts (bytes), library included.',
  },
  networkBufferSizeBytes: { key: 'taskmanager.memory.segment-size', default: 32 * 1024, min: 256, description: 'Size of one network buffer (bytes).' },
  networkBuffersPerChannel: {
    key: 'taskmanager.network.memory.buffers-per-channel',
    default: 8,
    min: 1,
    description: 'Credits a consumer grants per input channel: the most buffers in flight on it.',
  },
  bufferTimeoutMs: { key: 'execution.buffer-timeout', default: 100, min: 0, description: 'A partly filled output buffer is sent after this long (ms).' },
  fileOpenTimeoutMs: {
    key: 'execution.file-open.timeout',
    default: 30_000,
    min: 1,
    description:
      "Deadline for opening a text sink or source (ms): a sink's staging folder and part file, each read of a source's splits, the listing of a source's files, the check of a sink's target at submission. Past it the task or job fails naming the path.",
  },
  combinerMaxKeys: {
    key: 'execution.combiner.max-keys',
    default: 65_536,
    min: 0,
    description:
      'Keys a producer pre-aggregates at once per output into a bounded keyed sum / reduce / aggregate; past this many it sends its partial results and starts over (0: every record goes on as its own partial).',
  },
  previousWorkerRecoveryTimeoutMs: {
    key: 'resourcemanager.previous-worker.recovery.timeout',
    default: 5_000,
    min: 0,
    description:
      "A ResourceManager that takes over from a former leader of the job starts no TaskExecutor for this long, while the job's TaskExecutors register with it and report their slots; it stops waiting once the job's slots are there (ms).",
  },
  jobManagerMaxAttempts: {
    key: 'jobmanager.max-attempts',
    default: 4,
    min: 1,
    description:
      'JobManager processes launched for one job, the first included: when one ends (or its lease lapses) before the job did, the Dispatcher launches a successor that recovers the job, until this many were launched; then the job FAILS saying why.',
  },
  reconcileIntervalMs: {
    key: 'dispatcher.reconcile-interval',
    default: 1_000,
    min: 10,
    description:
      'How often the Dispatcher looks for running jobs whose JobManager lease lapsed (a JobManager that died unseen, or hangs) and launches a successor (ms). On AWS a scheduled sweep does it every minute.',
  },
  submissionTimeoutMs: {
    key: 'dispatcher.submission-timeout',
    default: 300_000,
    min: 1_000,
    description:
      'A job still being submitted this long after its record was written lost its submitter (a Dispatcher that died or a function that timed out, and no client sent the request again): the reconciler completes the submission when its JobGraph and library are stored, and otherwise ends the job FAILED saying so (ms). Keep it above the longest a submission request can take.',
  },
  warmPoolJobManagers: {
    key: 'cluster.warm-pool.jobmanagers',
    default: 1,
    min: 0,
    description:
      "JobManager processes kept ready after their job ended, for 'cluster.warm-pool.idle-timeout': the Dispatcher hands the next admitted job (or a recovery) to a ready one instead of starting a process (an ECS task on AWS). 0 turns the warm pool off.",
  },
  warmPoolTaskManagers: {
    key: 'cluster.warm-pool.taskmanagers',
    default: 2,
    min: 0,
    description:
      "Idle, registered TaskExecutors each ready JobManager keeps (the last job's, whose slots are all free); its next job takes their slots first and starts TaskExecutors only for what is missing. Those the job does not need are stopped.",
  },
  warmPoolPollIntervalMs: {
    key: 'cluster.warm-pool.poll-interval',
    default: 25,
    min: 5,
    description:
      'How often a ready JobManager looks for a job the Dispatcher gave it (a read of one lease; ms), once it has been ready a while: right after its job ended it looks every 5 ms, slowing by 1 ms every 100 ms down to this. The Dispatcher may run where it cannot call the JobManager (a function outside the VPC), so the job comes through the store.',
  },
  warmPoolIdleTimeoutMs: {
    key: 'cluster.warm-pool.idle-timeout',
    default: 60_000,
    min: 0,
    description: 'A ready JobManager with no job for this long stops its TaskExecutors and exits: no process (or task) is left at rest (ms).',
  },
  restartStrategy: {
    key: 'restart-strategy.type',
    default: 'exponential-delay',
    values: ['none', 'fixed-delay', 'exponential-delay', 'failure-rate'],
    description:
      'How a job restarts failed tasks: none, fixed-delay, exponential-delay or failure-rate. The default lets a job survive a lost TaskExecutor or a passing failure; a job can set its own (env.setRestartStrategy).',
  },
  restartFixedDelayAttempts: {
    key: 'restart-strategy.fixed-delay.attempts',
    default: 3,
    min: 0,
    description: 'fixed-delay: restarts allowed before the job fails.',
  },
  restartFixedDelayMs: { key: 'restart-strategy.fixed-delay.delay', default: 1_000, min: 0, description: 'fixed-delay: wait before each restart (ms).' },
  restartInitialBackoffMs: {
    key: 'restart-strategy.exponential-delay.initial-backoff',
    default: 100,
    min: 0,
    description: 'exponential-delay: wait before the first restart (ms).',
  },
  restartMaxBackoffMs: {
    key: 'restart-strategy.exponential-delay.max-backoff',
    default: 10_000,
    min: 0,
    description: 'exponential-delay: the longest wait between restarts (ms).',
  },
  restartBackoffMultiplier: {
    key: 'restart-strategy.exponential-delay.backoff-multiplier',
    default: 2,
    min: 1,
    fractional: true,
    description: 'exponential-delay: each wait is the previous one times this.',
  },
  restartJitterFactor: {
    key: 'restart-strategy.exponential-delay.jitter-factor',
    default: 0.1,
    min: 0,
    max: 1,
    fractional: true,
    description: 'exponential-delay: each wait moves randomly by up to this fraction of itself, so restarts of many jobs spread out.',
  },
  restartResetBackoffThresholdMs: {
    key: 'restart-strategy.exponential-delay.reset-backoff-threshold',
    default: 60_000,
    min: 1,
    description: 'exponential-delay: a job that ran this long without a failure starts over at the initial backoff, with its attempts counted afresh (ms).',
  },
  restartAttemptsBeforeReset: {
    key: 'restart-strategy.exponential-delay.attempts-before-reset-backoff',
    default: 5,
    min: 0,
    description: 'exponential-delay: restarts allowed, counted since the last reset, before the job fails.',
  },
  restartMaxFailuresPerInterval: {
    key: 'restart-strategy.failure-rate.max-failures-per-interval',
    default: 3,
    min: 1,
    description: 'failure-rate: the job fails once more than this many failures happen within the interval.',
  },
  restartFailureRateIntervalMs: {
    key: 'restart-strategy.failure-rate.failure-rate-interval',
    default: 60_000,
    min: 1,
    description: 'failure-rate: the interval failures are counted in (ms).',
  },
  restartFailureRateDelayMs: {
    key: 'restart-strategy.failure-rate.delay',
    default: 1_000,
    min: 0,
    description: 'failure-rate: wait before each restart (ms).',
  },
  internalSslEnabled: {
    key: 'security.ssl.internal.enabled',
    default: 'false',
    values: ['false', 'true'],
    description:
      "Whether RPC and data connections between a cluster's processes run over TLS. Keys are pre-shared, derived from the cluster secret like the keys the connections already prove (no certificates): a peer without one is disconnected in the TLS handshake. Every process of a cluster needs the same setting.",
  },
  ...CHECKPOINT_OPTIONS,
} as const satisfies Record<string, OptionSpec>;

export type ConfigField = keyof typeof CONFIG_OPTIONS;
export type FloeConfig = { readonly [K in ConfigField]: (typeof CONFIG_OPTIONS)[K]['default'] extends number ? number : string };

const BY_KEY = new Map<string, ConfigField>((Object.entries(CONFIG_OPTIONS) as [ConfigField, OptionSpec][]).map(([field, spec]) => [spec.key, field]));

export const defaultConfig: FloeConfig = Object.fromEntries(
  (Object.entries(CONFIG_OPTIONS) as [ConfigField, OptionSpec][]).map(([f, s]) => [f, s.default]),
) as FloeConfig;

/**
 * Builds a config from Flink-style keys (`heartbeat.timeout`) or field names (`heartbeatTimeoutMs`).
 * Every problem is reported at once, naming the key, the value found and what is expected.
 */
export function loadConfig(values: Readonly<Record<string, unknown>> = {}, base: FloeConfig = defaultConfig): FloeConfig {
  const out: Record<string, number | string> = { ...base };
  const problems: string[] = [];
  for (const [name, raw] of Object.entries(values)) {
    const field = BY_KEY.get(name) ?? (name in CONFIG_OPTIONS ? (name as ConfigField) : undefined);
    if (field === undefined) {
      problems.push(unknownOption(name));
      continue;
    }
    const spec: OptionSpec = CONFIG_OPTIONS[field];
    if (typeof spec.default === 'number') {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
      if (!Number.isFinite(n) || (spec.fractional !== true && !Number.isSafeInteger(n))) {
        problems.push(`'${spec.key}' must be ${spec.fractional === true ? 'a finite number' : 'an integer'}, found ${JSON.stringify(raw)}`);
      } else if (spec.min !== undefined && n < spec.min) {
        problems.push(`'${spec.key}' must be >= ${spec.min}, found ${n}`);
      } else if (spec.max !== undefined && n > spec.max) {
        problems.push(`'${spec.key}' must be <= ${spec.max}, found ${n}`);
      } else {
        out[field] = n;
      }
    } else {
      // A switch ('false' | 'true') takes a JSON boolean too.
      const text = typeof raw === 'boolean' && spec.values?.includes(String(raw)) === true ? String(raw) : raw;
      // An option whose default is '' (unset: state.checkpoints.dir, s3.entropy.key) takes '' back, as configToEnv writes it.
      if (typeof text !== 'string' || (text === '' && spec.default !== '')) {
        problems.push(`'${spec.key}' must be a non-empty string, found ${JSON.stringify(raw)}`);
      } else if (spec.values !== undefined && !spec.values.includes(text)) {
        problems.push(`'${spec.key}' must be one of ${spec.values.join(', ')}, found ${JSON.stringify(raw)}`);
      } else {
        out[field] = text;
      }
    }
  }
  const cfg = out as FloeConfig;
  if (cfg.leaseRenewIntervalMs >= cfg.leaseDurationMs) {
    problems.push(
      `'high-availability.lease.renew-interval' (${cfg.leaseRenewIntervalMs} ms) must be below 'high-availability.lease.duration' (${cfg.leaseDurationMs} ms)`,
    );
  }
  if (cfg.heartbeatRpcFailureThreshold === 0) {
    problems.push(`'heartbeat.rpc-failure-threshold' must be a positive count of failed calls, or -1 to turn the rule off, found 0`);
  }
  // Light slots run on the TaskExecutor's own thread and heap: no share per slot to check.
  if (cfg.slotMode !== 'light' && slotHeapMiB(cfg) < MIN_SLOT_HEAP_MIB) {
    problems.push(
      `'taskmanager.memory.process.size' (${cfg.taskManagerMemoryMiB} MiB) less 'taskmanager.memory.framework.heap.size' (${cfg.taskManagerFrameworkHeapMiB} MiB) leaves ${slotHeapMiB(cfg)} MiB per slot for ${cfg.numberOfTaskSlots} slots ('taskmanager.numberOfTaskSlots'), below the ${MIN_SLOT_HEAP_MIB} MiB a slot needs; give the TaskExecutor more memory or fewer slots`,
    );
  }
  if (cfg.checkpointingIntervalMs !== 0 && cfg.checkpointingIntervalMs < 10) {
    problems.push(`'execution.checkpointing.interval' must be 0 (off) or at least 10 ms, found ${cfg.checkpointingIntervalMs}`);
  }
  if (cfg.heartbeatIntervalMs >= cfg.heartbeatTimeoutMs) {
    problems.push(`'heartbeat.interval' (${cfg.heartbeatIntervalMs} ms) must be below 'heartbeat.timeout' (${cfg.heartbeatTimeoutMs} ms)`);
  }
  if (problems.length > 0) throw new ConfigurationError(`invalid configuration: ${problems.join('; ')}`);
  return cfg;
}

/**
 * The keys a mistyped one most likely meant: the nearest by edit distance (case ignored), a key whose
 * last part it is (`numberOfTaskSlots`), or the key of a field name with a typo; none when nothing is near.
 */
export function nearestConfigKeys(name: string): string[] {
  const wanted = name.toLowerCase();
  const scored = (Object.entries(CONFIG_OPTIONS) as [ConfigField, OptionSpec][]).map(([field, spec]) => {
    const key = spec.key.toLowerCase();
    const tail = key.slice(key.lastIndexOf('.') + 1);
    const distance = Math.min(editDistance(wanted, key), editDistance(wanted, field.toLowerCase()), tail === wanted ? 0 : Infinity);
    return { key: spec.key, distance };
  });
  const best = Math.min(...scored.map((s) => s.distance));
  if (best > Math.max(2, Math.floor(wanted.length / 4))) return [];
  return scored.filter((s) => s.distance === best).map((s) => s.key);
}

function unknownOption(name: string): string {
  const near = nearestConfigKeys(name);
  if (near.length > 0) return `unknown option '${name}': did you mean ${near.map((k) => `'${k}'`).join(' or ')}? (docs/CONFIGURATION.md lists every option)`;
  return `unknown option '${name}' (known: ${[...BY_KEY.keys()].join(', ')})`;
}

/** The least heap a slot's worker thread starts and runs a task with (MiB). */
export const MIN_SLOT_HEAP_MIB = 16;

/**
 * Each slot's heap limit on a TaskExecutor without a resource profile (MiB): what the TaskExecutor does
 * not keep for itself, shared by its slots (Flink's task heap, from taskmanager.memory.*).
 */
export function slotHeapMiB(config: FloeConfig): number {
  return Math.floor((config.taskManagerMemoryMiB - config.taskManagerFrameworkHeapMiB) / config.numberOfTaskSlots);
}

/** Config travels to child processes and containers as JSON in this environment variable. */
export const CONFIG_ENV = FloeEnv.CONFIG;

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): FloeConfig {
  const raw = env[CONFIG_ENV];
  if (raw === undefined || raw === '') return defaultConfig;
  const expected = `${CONFIG_ENV} takes a JSON object of option keys to values, e.g. ${CONFIG_ENV}='{"heartbeat.timeout": 20000}'`;
  const found = raw.length > 80 ? `${raw.slice(0, 80)}…` : raw;
  if (/^[\w./~-]+$/.test(raw.trim()) && /[./]/.test(raw)) {
    throw new ConfigurationError(`${expected}, not a file name; found '${found}'. To use a file's options, pass its content: ${CONFIG_ENV}="$(cat ${found})"`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new ConfigurationError(`${CONFIG_ENV} is not valid JSON (${(e as Error).message}): ${expected}; found '${found}'`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigurationError(`${expected}; found '${found}'`);
  }
  try {
    return loadConfig(parsed as Record<string, unknown>);
  } catch (e) {
    if (e instanceof ConfigurationError) throw new ConfigurationError(`${CONFIG_ENV}: ${e.message}`);
    throw e;
  }
}

export function configToEnv(config: FloeConfig): string {
  return JSON.stringify(config);
}
