// Benchmark: submit → RUNNING (the JobMaster has written RUNNING to the job record) on the AWS backend
// over emulators — API Gateway stand-in → Lambda handler → DynamoDB Local + s3rver → ECS emulator
// running the JobManager and TaskExecutor processes — side by side with the embedded cluster in the same
// run. Per backend: the first job starts every process (cold); each later one waits until the warm pool
// has a JobManager ready (GET /overview) and then runs in it (warm). BENCH_WARMUP warm jobs first
// (default 10), timed and reported apart: the emulators (DynamoDB Local is a JVM) and the JobManager's
// own code get faster over the first jobs — the medians of the first ten warm jobs ran ~25 % above
// those of jobs 11-40 — so that the figure is the steady state of a warm pool, not its first minute.
// Then BENCH_RUNS warm runs (default 10): min / median / max, and the warm median ÷ the 300 ms target.
// Then BENCH_HANDOFFS hand-offs (default 5) on a cluster that runs one job at a time
// (`cluster.max-jobmanagers` 1, which the runs above never reach: each waits for the last job's
// JobManager to be ready, which it is only after giving the capacity back): an unbounded job runs, the
// same job as above is submitted and waits in line, the first is cancelled, and the figure is cancel →
// the waiting job RUNNING. It starts in the JobManager the cancelled job leaves ready, which tells the
// Dispatcher that capacity is free — on AWS by an event on the cluster's bus (the EventBridge emulator,
// delivering to the function's handler as the stack's rule would); without that notice the waiting job
// would start at the next submission or the minute's sweep.
// Run: npm run bench:aws-submit   (figures also go to bench/out/submit-running-aws.json).
import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../runtime/api/library.js';
import { loadJobDefinition } from '../runtime/api/program.js';
import { buildJobGraph } from '../runtime/api/translate.js';
import { startAwsDispatcher } from '../runtime/aws/aws-dispatcher.js';
import { startCluster, stopCluster } from '../runtime/cli/cluster.js';
import { ensureExampleLog } from '../runtime/cli/example.js';
import { RestClient } from '../runtime/cli/rest-client.js';
import { configToEnv, loadConfig } from '../runtime/core/config.js';
import { JobId } from '../runtime/core/ids.js';
import { silentLogger } from '../runtime/core/logger.js';
import { packageRoot } from '../runtime/core/paths.js';
import { createCapacityFreedHandler, isCapacityFreed } from '../functions/ecs-task-events.js';
import { createHttpApiHandler } from '../functions/http-api.js';
import { startApiGatewayAdapter } from '../test/aws/apigw-adapter.js';
import { EcsEmulator } from '../test/aws/ecs-emulator.js';
import { awsServicesEnv, createTables, startEmulators } from '../test/aws/emulators.js';
import { EventBridgeEmulator } from '../test/aws/eventbridge-emulator.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 10);
const HANDOFFS = Number(process.env['BENCH_HANDOFFS'] ?? 5);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 10);
const round2 = (x: number): number => Math.round(x * 100) / 100;
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const work = mkdtempSync(join(tmpdir(), 'floe-bench-aws-'));
const input = join(work, 'logs.txt');
ensureExampleLog(input);
const { code, sha256 } = await bundleJobFile(join(packageRoot, 'examples', 'log-levels.ts'));
const definition = loadJobDefinition(await importLibrary(code, join(work, 'cache')), 'default');
const graph = () =>
  buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [input],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 4,
  });
const unbounded = await bundleJobFile(join(packageRoot, 'bench', 'jobs', 'unbounded-keyed.ts'));
const unboundedDefinition = loadJobDefinition(await importLibrary(unbounded.code, join(work, 'cache')), 'default');
const unboundedGraph = () =>
  buildJobGraph(unboundedDefinition, {
    jobId: JobId.random(),
    args: ['2', '200'],
    exportName: 'default',
    library: { sha256: unbounded.sha256, sizeBytes: unbounded.code.length },
    defaultParallelism: 2,
  });
// One job at a time: the hand-offs need a job to wait; the runs before them never do (see above).
const config = { 'taskmanager.numberOfTaskSlots': 2, 'cluster.max-jobmanagers': 1 };
// Inside the package, so the bundles' bare imports resolve from node_modules.
const entryDir = join(packageRoot, 'bench', 'out', `aws-entrypoints-${process.pid}`);

/** Waits until the warm pool has a JobManager ready (the last job's, after it ended). */
async function warmPoolReady(client: RestClient): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await client.overview()).warmPool.readyJobManagers < 1) {
    if (Date.now() > deadline) throw new Error('no JobManager became ready in the warm pool within 60 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One cold run, WARMUP warm-up runs, then RUNS warm ones. */
async function coldThenWarm(client: RestClient, label: string): Promise<{ cold: number; warmup: number[]; warm: number[] }> {
  const cold = await submitToRunning(client);
  process.stderr.write(`${label} cold: ${cold.toFixed(0)} ms\n`);
  const warmup: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    await warmPoolReady(client);
    const ms = await submitToRunning(client);
    (i < WARMUP ? warmup : warm).push(ms);
    process.stderr.write(
      i < WARMUP ? `${label} warm-up run ${i + 1}/${WARMUP}: ${ms.toFixed(0)} ms\n` : `${label} warm run ${i - WARMUP + 1}/${RUNS}: ${ms.toFixed(0)} ms\n`,
    );
  }
  return { cold, warmup, warm };
}

/** Waits until the job's record says `status` (or a later state); answers when it was seen. */
async function seen(client: RestClient, jobId: string, statuses: readonly string[], what: string): Promise<number> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const job = await client.getJob(jobId);
    if (statuses.includes(job.status)) return performance.now();
    if (job.status === 'FAILED' || job.status === 'CANCELED')
      throw new Error(`${what} ended ${job.status}: ${JSON.stringify(await client.getJobExceptions(jobId))}`);
    if (Date.now() > deadline) throw new Error(`${what} did not reach ${statuses.join(' or ')} within 90 s (it is ${job.status})`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * HANDOFFS times: an unbounded job runs, the bench job waits behind it, the first is cancelled; the
 * time from the cancel request to the waiting job RUNNING.
 */
async function handOffs(client: RestClient, label: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < HANDOFFS; i++) {
    await warmPoolReady(client);
    const ahead = (await client.submitJob(unboundedGraph(), unbounded.code)).jobId;
    await seen(client, ahead, ['RUNNING'], 'the job ahead');
    const waiting = (await client.submitJob(graph(), code)).jobId;
    const inLine = await client.getJob(waiting);
    if (inLine.waiting === undefined) throw new Error(`the second job did not wait in line (it is ${inLine.status})`);
    const cancelled = performance.now();
    await client.cancelJob(ahead);
    const running = await seen(client, waiting, ['RUNNING', 'FINISHED'], 'the waiting job');
    times.push(running - cancelled);
    await seen(client, waiting, ['FINISHED'], 'the waiting job');
    process.stderr.write(`${label} hand-off ${i + 1}/${HANDOFFS}: cancel -> the waiting job RUNNING ${(running - cancelled).toFixed(0)} ms\n`);
  }
  return times;
}

/** Submits, times until the record says RUNNING, then lets the job end before the next run. */
async function submitToRunning(client: RestClient): Promise<number> {
  const started = performance.now();
  const { jobId } = await client.submitJob(graph(), code);
  let runningAt: number | undefined;
  for (;;) {
    const job = await client.getJob(jobId);
    if (runningAt === undefined && (job.status === 'RUNNING' || job.status === 'FINISHED')) runningAt = performance.now();
    if (job.status === 'FINISHED') return runningAt! - started;
    if (job.status === 'FAILED' || job.status === 'CANCELED')
      throw new Error(`benchmark job ended ${job.status}: ${JSON.stringify(await client.getJobExceptions(jobId))}`);
    await new Promise((r) => setTimeout(r, runningAt === undefined ? 5 : 50));
  }
}

// ---- embedded ----
let embedded: { cold: number; warmup: number[]; warm: number[] } = { cold: NaN, warmup: [], warm: [] };
let embeddedHandOffs: number[] = [];
{
  const stateDir = join(work, 'embedded');
  const { info } = await startCluster(stateDir, { config });
  try {
    const client = RestClient.forCluster(info);
    embedded = await coldThenWarm(client, 'embedded');
    embeddedHandOffs = await handOffs(client, 'embedded');
  } finally {
    await stopCluster(stateDir);
  }
}

// ---- AWS on emulators ----
let aws: { cold: number; warmup: number[]; warm: number[] } = { cold: NaN, warmup: [], warm: [] };
let awsHandOffs: number[] = [];
{
  const emulators = await startEmulators({ jvmFastStart: false });
  const ecs = await EcsEmulator.start({ region: emulators.region, logDir: join(work, 'ecs-logs') });
  const bus = 'floe-bench-events';
  const events = await EventBridgeEmulator.start({ buses: [bus], region: emulators.region });
  try {
    const tables = await createTables(emulators);
    const secret = 'bench-secret';
    // As the task definitions give it: credentials as a task role would; to the JobManager only, the secret as ECS injects it.
    const taskEnv = { AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey };
    // Its own copy of the entry points, so a rebuild of dist/ during the run cannot pull them away.
    await build({
      entryPoints: Object.fromEntries(['jobmanager', 'taskexecutor', 'slot-worker'].map((n) => [n, join(packageRoot, 'runtime/entrypoints', `${n}.ts`)])),
      outdir: entryDir,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      splitting: true,
      logLevel: 'warning',
    });
    // As the stack's JobManager task definition: it knows the cluster's bus.
    ecs.registerTaskDefinition('floe-jobmanager', {
      command: [process.execPath, join(entryDir, 'jobmanager.js')],
      env: { ...taskEnv, FLOE_SECRET: secret, FLOE_EVENT_BUS: bus, FLOE_EVENTS_ENDPOINT: events.endpoint },
    });
    ecs.registerTaskDefinition('floe-taskexecutor', { command: [process.execPath, join(entryDir, 'taskexecutor.js')], env: taskEnv });
    const dispatcher = await startAwsDispatcher({
      env: {
        ...awsServicesEnv(emulators, tables),
        FLOE_SECRET: secret,
        FLOE_ECS_CLUSTER: 'floe-bench',
        FLOE_ECS_TASK_DEFINITION_JOBMANAGER: 'floe-jobmanager',
        FLOE_ECS_TASK_DEFINITION_TASKEXECUTOR: 'floe-taskexecutor',
        FLOE_ECS_SUBNETS: 'subnet-local',
        FLOE_ECS_ENDPOINT: ecs.endpoint,
        FLOE_ECS_POLL_INTERVAL_MS: '200',
        FLOE_CONFIG: configToEnv(loadConfig(config)),
      },
      logger: silentLogger,
      watchJobManagers: true,
    });
    const adapter = await startApiGatewayAdapter(createHttpApiHandler({ router: async () => dispatcher.router, logger: silentLogger }));
    // The stack's rule: capacity-freed events on the bus go to the function.
    const capacityFreed = createCapacityFreedHandler({ dispatcher: async () => dispatcher.dispatcher, logger: silentLogger });
    const eventErrors: unknown[] = [];
    events.onEvent((event) => {
      if (isCapacityFreed(event)) capacityFreed(event).catch((error: unknown) => eventErrors.push(error));
    });
    try {
      const client = new RestClient({ baseUrl: adapter.url, secret });
      aws = await coldThenWarm(client, 'aws-emulators');
      awsHandOffs = await handOffs(client, 'aws-emulators');
      if (eventErrors.length > 0) throw new Error(`the function failed on capacity-freed events: ${eventErrors.map(String).join('; ')}`);
    } finally {
      events.onEvent(undefined);
      await adapter.close();
      await dispatcher.close();
    }
  } finally {
    await ecs.close();
    await events.close();
    await emulators.stop();
  }
}
if (process.env['BENCH_KEEP_LOGS'] === '1') process.stderr.write(`kept the logs in ${work}\n`);
else rmSync(work, { recursive: true, force: true });
rmSync(entryDir, { recursive: true, force: true });

const TARGET_MS = 300;
const spread = (xs: readonly number[]) => ({
  minMs: Math.round(Math.min(...xs)),
  medianMs: Math.round(median(xs)),
  maxMs: Math.round(Math.max(...xs)),
  ms: xs.map(Math.round),
});
const spreadOrNone = (xs: readonly number[]) => (xs.length === 0 ? undefined : spread(xs));
const backend = (b: { cold: number; warmup: number[]; warm: number[] }) => ({
  coldMs: Math.round(b.cold),
  warmup: spreadOrNone(b.warmup),
  warm: spread(b.warm),
  warmMedianOverTarget: round2(median(b.warm) / TARGET_MS),
});
const figures = {
  job: 'examples/log-levels.ts, parallelism 4, 2 TaskExecutors x 2 slots',
  measured: "POST /jobs sent -> GET /jobs/:id first answers RUNNING; warm: the last job's JobManager and TaskExecutors ready in the warm pool",
  warmupRuns: WARMUP,
  warmRuns: RUNS,
  embedded: backend(embedded),
  awsEmulators: backend(aws),
  handOff: {
    what: 'one job at a time: cancel of the running job -> the job waiting in line RUNNING (in the JobManager the cancelled job leaves ready, told that capacity is free)',
    embedded: spreadOrNone(embeddedHandOffs),
    awsEmulators: spreadOrNone(awsHandOffs),
  },
};
mkdirSync(join(packageRoot, 'bench', 'out'), { recursive: true });
writeFileSync(join(packageRoot, 'bench', 'out', 'submit-running-aws.json'), JSON.stringify(figures, null, 2) + '\n');
console.log(`submit → RUNNING, ${figures.job}:`);
for (const [name, f] of [
  ['embedded cluster', figures.embedded],
  ['AWS backend on emulators', figures.awsEmulators],
] as const) {
  const first = f.warmup === undefined ? '' : `; the ${WARMUP} warm-up jobs before them ${f.warmup.minMs} / ${f.warmup.medianMs} / ${f.warmup.maxMs} ms`;
  console.log(
    `  ${name.padEnd(26)} cold ${f.coldMs} ms; warm pool ${f.warm.minMs} / ${f.warm.medianMs} / ${f.warm.maxMs} ms (min / median / max of ${RUNS}), median ÷ ${TARGET_MS} ms target = ${f.warmMedianOverTarget}${first}`,
  );
}
console.log(`a job waiting in line (one job at a time), cancel of the job ahead -> it RUNNING, min / median / max of ${HANDOFFS}:`);
for (const [name, h] of [
  ['embedded cluster', figures.handOff.embedded],
  ['AWS backend on emulators', figures.handOff.awsEmulators],
] as const) {
  if (h !== undefined) console.log(`  ${name.padEnd(26)} ${h.minMs} / ${h.medianMs} / ${h.maxMs} ms`);
}
