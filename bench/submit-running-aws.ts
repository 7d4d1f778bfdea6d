// Benchmark: submit → RUNNING (the JobMaster has written RUNNING to the job record) on the AWS backend
// over emulators — API Gateway stand-in → Lambda handler → DynamoDB Local + s3rver → ECS emulator
// starting the JobManager process — side by side with the embedded cluster in the same run; median of 5.
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
import { createHttpApiHandler } from '../functions/http-api.js';
import { startApiGatewayAdapter } from '../test/aws/apigw-adapter.js';
import { EcsEmulator } from '../test/aws/ecs-emulator.js';
import { awsServicesEnv, createTables, startEmulators } from '../test/aws/emulators.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
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
const graph = () => buildJobGraph(definition, { jobId: JobId.random(), args: [input], exportName: 'default', library: { sha256, sizeBytes: code.length }, defaultParallelism: 4 });
const config = { 'taskmanager.numberOfTaskSlots': 2 };
// Inside the package, so the bundles' bare imports resolve from node_modules.
const entryDir = join(packageRoot, 'bench', 'out', `aws-entrypoints-${process.pid}`);

/** Submits, times until the record says RUNNING, then lets the job end before the next run. */
async function submitToRunning(client: RestClient): Promise<number> {
  const started = performance.now();
  const { jobId } = await client.submitJob(graph(), code);
  let runningAt: number | undefined;
  for (;;) {
    const job = await client.getJob(jobId);
    if (runningAt === undefined && (job.status === 'RUNNING' || job.status === 'FINISHED')) runningAt = performance.now();
    if (job.status === 'FINISHED') return runningAt! - started;
    if (job.status === 'FAILED' || job.status === 'CANCELED') throw new Error(`benchmark job ended ${job.status}: ${JSON.stringify(await client.getJobExceptions(jobId))}`);
    await new Promise((r) => setTimeout(r, runningAt === undefined ? 5 : 50));
  }
}

// ---- embedded ----
const embedded: number[] = [];
{
  const stateDir = join(work, 'embedded');
  const { info } = await startCluster(stateDir, { config });
  try {
    const client = RestClient.forCluster(info);
    for (let i = 0; i < RUNS; i++) {
      embedded.push(await submitToRunning(client));
      process.stderr.write(`embedded run ${i + 1}/${RUNS}: ${embedded.at(-1)!.toFixed(0)} ms\n`);
    }
  } finally {
    await stopCluster(stateDir);
  }
}

// ---- AWS on emulators ----
const aws: number[] = [];
{
  const emulators = await startEmulators({ jvmFastStart: false });
  const ecs = await EcsEmulator.start({ region: emulators.region, logDir: join(work, 'ecs-logs') });
  try {
    const tables = await createTables(emulators);
    const secret = 'bench-secret';
    // As the task definitions give it: credentials as a task role would, the secret as ECS injects it.
    const taskEnv = { AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey, FLOE_SECRET: secret };
    // Its own copy of the entry points, so a rebuild of dist/ during the run cannot pull them away.
    await build({
      entryPoints: Object.fromEntries(['jobmanager', 'taskexecutor', 'slot-worker'].map((n) => [n, join(packageRoot, 'runtime/entrypoints', `${n}.ts`)])),
      outdir: entryDir, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', splitting: true, logLevel: 'warning',
    });
    ecs.registerTaskDefinition('floe-jobmanager', { command: [process.execPath, join(entryDir, 'jobmanager.js')], env: taskEnv });
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
    try {
      const client = new RestClient({ baseUrl: adapter.url, secret });
      for (let i = 0; i < RUNS; i++) {
        aws.push(await submitToRunning(client));
        process.stderr.write(`aws-emulators run ${i + 1}/${RUNS}: ${aws.at(-1)!.toFixed(0)} ms\n`);
      }
    } finally {
      await adapter.close();
      await dispatcher.close();
    }
  } finally {
    await ecs.close();
    await emulators.stop();
  }
}
rmSync(work, { recursive: true, force: true });
rmSync(entryDir, { recursive: true, force: true });

const figures = {
  job: 'examples/log-levels.ts, parallelism 4, 2 TaskExecutors x 2 slots',
  measured: 'POST /jobs sent -> GET /jobs/:id first answers RUNNING',
  runs: RUNS,
  embeddedMedianMs: Math.round(median(embedded)),
  awsEmulatorsMedianMs: Math.round(median(aws)),
  embeddedMs: embedded.map(Math.round),
  awsEmulatorsMs: aws.map(Math.round),
};
mkdirSync(join(packageRoot, 'bench', 'out'), { recursive: true });
writeFileSync(join(packageRoot, 'bench', 'out', 'submit-running-aws.json'), JSON.stringify(figures, null, 2) + '\n');
console.log(`submit → RUNNING, ${figures.job}, median of ${RUNS}:`);
console.log(`  embedded cluster:          ${figures.embeddedMedianMs} ms   (runs: ${figures.embeddedMs.join(', ')})`);
console.log(`  AWS backend on emulators:  ${figures.awsEmulatorsMedianMs} ms   (runs: ${figures.awsEmulatorsMs.join(', ')})`);
