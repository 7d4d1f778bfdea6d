// Benchmark: a 10,000 × 10,000 all-to-all job (source → hash → sink, parallelism 10,000 each) through what
// the Dispatcher and the JobMaster do with it before any task runs. Each round runs in a fresh child process
// (node --expose-gc), so its heap holds nothing of the rounds before it.
//   figure 1, "build": the JSON body a client sends parsed and checked as the Dispatcher does
//     (parseJsonBytes with the submit route's options, validateJobGraph), then what the JobMaster builds on
//     start (the ExecutionGraph with its consumed-partition groups, the pipelined regions, the failover
//     strategy, the deployment descriptor factory). Targets: < 1 s, < 200 MiB of heap (heapUsed, sampled
//     after every step; the most it was is the peak).
//   figure 2, "deploy": a deployment descriptor for each of the 20,000 tasks (every task given a slot on
//     one of 2,500 TaskExecutors of 4 slots), sent as the Scheduler sends them: per deployment chunk, one
//     submitTasks call per TaskExecutor carrying its tasks packed (packTaskDeployments), each call
//     serialized as the RPC layer sends it (encodeArgs). Reported: time, bytes (of all calls; "largest"
//     is the largest call), heap; the sinks share one description of the 10,000 producers, which each
//     call carries once.
// Run: npm run bench:big-graph   (figures also go to bench/out/big-graph.json)
// BENCH_ROUNDS (default 3), BENCH_PARALLELISM (default 10000).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AllocationId, FencingToken, JobId, ResourceId } from '../runtime/core/ids.js';
import { parseJsonBytes } from '../runtime/dispatcher/json-body.js';
import type { JobGraph } from '../runtime/jobgraph/jobgraph.js';
import { validateJobGraph } from '../runtime/jobgraph/validate.js';
import { TaskDeploymentDescriptorFactory } from '../runtime/jobmaster/deployment-descriptors.js';
import { ExecutionGraph } from '../runtime/jobmaster/execution-graph.js';
import { RestartPipelinedRegionFailoverStrategy } from '../runtime/jobmaster/failover-strategy.js';
import { PartitionTracker } from '../runtime/jobmaster/partition-tracker.js';
import { computePipelinedRegions } from '../runtime/jobmaster/pipelined-regions.js';
import { DEFAULT_DEPLOY_CHUNK_SIZE } from '../runtime/jobmaster/execution-deployer.js';
import { packTaskDeployments, type TaskDeploymentDescriptor } from '../runtime/protocol/task-deployment.js';
import { encodeArgs } from '../runtime/rpc/rpc-dispatcher.js';
import { median, round, writeFigures } from './lib/bench-support.js';
import { s3FileSystem } from '../runtime/aws/s3-file-system.js';
import { registerFileSystem } from '../runtime/blob/file-systems.js';
import { localFileSystem } from '../runtime/local/fs-file-system.js';

// The file systems this process's JobMasters, Dispatchers and tasks reach: local paths, and S3.
registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);

const TARGET_BUILD_MS = 1_000;
const TARGET_HEAP_MIB = 200;
const MiB = 1024 * 1024;

interface RoundFigures {
  readonly build: {
    readonly ms: number;
    readonly parseMs: number;
    readonly validateMs: number;
    readonly executionGraphMs: number;
    readonly regionsMs: number;
    readonly peakHeapMiB: number;
    readonly retainedHeapMiB: number;
  };
  readonly deploy: {
    readonly ms: number;
    readonly createMs: number;
    readonly serializeMs: number;
    readonly bytes: number;
    readonly largestBytes: number;
    readonly producerDescriptionsBuilt: number;
    readonly peakHeapMiB: number;
  };
  /** The child's peak resident set (VmHWM): everything, node itself included. */
  readonly peakRssMiB: number;
}

/** The JSON body `floe run` sends for the job (the library is stored already, so only the graph). */
export function bigGraphBody(parallelism: number): Uint8Array {
  const vertex = (id: string, kind: 'source' | 'sink') => ({
    id,
    name: id,
    parallelism,
    maxParallelism: 32_768,
    slotSharingGroup: 'default',
    operators: [
      kind === 'source'
        ? { kind: 'source.sequence', id: `${id}-op`, name: 'numbers', from: 0, to: 1_000_000 }
        : { kind: 'sink.collect', id: `${id}-op`, name: 'collect', maxRecords: 100 },
    ],
  });
  const graph = {
    jobId: JobId.random(),
    name: 'big-graph',
    library: { sha256: 'a'.repeat(64), sizeBytes: 1 },
    program: { export: 'default', args: [] },
    vertices: [vertex('source', 'source'), vertex('sink', 'sink')],
    edges: [
      {
        id: 'source-sink',
        source: 'source',
        target: 'sink',
        distribution: 'all-to-all',
        partitioner: 'hash',
        partitionType: 'pipelined',
        keySelector: { export: 'default', operatorId: 'key' },
      },
    ],
  };
  return Buffer.from(JSON.stringify({ jobGraph: graph }), 'utf8');
}

function peakRssMiB(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'latin1'));
  return m === null ? 0 : Number(m[1]) / 1024;
}

/** One round, in this (child) process. */
function runRound(parallelism: number): RoundFigures {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run the round with node --expose-gc');
  const body = bigGraphBody(parallelism);
  gc();
  const base = process.memoryUsage().heapUsed;
  let peak = 0;
  const sample = (): void => {
    peak = Math.max(peak, process.memoryUsage().heapUsed - base);
  };

  const t0 = performance.now();
  const parsed = parseJsonBytes(body, { longStringFields: ['library'], fields: ['jobGraph', 'library'], jobGraphField: 'jobGraph' }) as { jobGraph: JobGraph };
  const t1 = performance.now();
  sample();
  validateJobGraph(parsed.jobGraph);
  const t2 = performance.now();
  sample();
  const graph = new ExecutionGraph(parsed.jobGraph);
  const t3 = performance.now();
  sample();
  const regions = computePipelinedRegions(parsed.jobGraph);
  const tracker = new PartitionTracker();
  const failover = new RestartPipelinedRegionFailoverStrategy(regions, graph, (edge, producer) => tracker.has(edge.id, producer.attemptId as never));
  const factory = new TaskDeploymentDescriptorFactory(parsed.jobGraph.jobId, graph, regions, (id) => `127.0.0.1:${40_000 + Number(id.slice(3))}`);
  const t4 = performance.now();
  sample();
  if (regions.regions.length !== 1) throw new Error(`expected one pipelined region, found ${regions.regions.length}`);
  if (failover.regionsToRestart([regions.regions[0]!]).length !== 1) throw new Error('expected a failure to restart the one region');
  gc();
  const retained = process.memoryUsage().heapUsed - base;

  // Every task gets a slot: 2,500 TaskExecutors of 4 slots; subtask i of both vertices shares slot i.
  for (const ev of graph.executionVertices) {
    ev.current.location = { resourceId: ResourceId.of(`te-${Math.floor(ev.subtaskIndex / 4)}`), allocationId: AllocationId.of(`slot-${ev.subtaskIndex}`) };
  }
  gc();
  const deployBase = process.memoryUsage().heapUsed;
  let deployPeak = 0;
  const t5 = performance.now();
  const descriptors = graph.executions.map((e) => factory.create(e));
  const t6 = performance.now();
  deployPeak = Math.max(deployPeak, process.memoryUsage().heapUsed - deployBase);
  let bytes = 0;
  let largest = 0;
  const token = FencingToken.of(1);
  for (let from = 0; from < descriptors.length; from += DEFAULT_DEPLOY_CHUNK_SIZE) {
    const perTaskExecutor = new Map<string, TaskDeploymentDescriptor[]>();
    for (const d of descriptors.slice(from, from + DEFAULT_DEPLOY_CHUNK_SIZE)) {
      const te = graph.execution(d.attemptId)!.location!.resourceId;
      let list = perTaskExecutor.get(te);
      if (list === undefined) perTaskExecutor.set(te, (list = []));
      list.push(d);
    }
    for (const batch of perTaskExecutor.values()) {
      // As the HTTP transport sends a call: the encoded arguments as UTF-8 bytes.
      const n = Buffer.from(encodeArgs([packTaskDeployments(batch), token]), 'utf8').length;
      bytes += n;
      largest = Math.max(largest, n);
    }
    deployPeak = Math.max(deployPeak, process.memoryUsage().heapUsed - deployBase);
  }
  const t7 = performance.now();
  deployPeak = Math.max(deployPeak, process.memoryUsage().heapUsed - deployBase);

  return {
    build: {
      ms: t4 - t0,
      parseMs: t1 - t0,
      validateMs: t2 - t1,
      executionGraphMs: t3 - t2,
      regionsMs: t4 - t3,
      peakHeapMiB: Math.max(peak, retained) / MiB,
      retainedHeapMiB: retained / MiB,
    },
    deploy: {
      ms: t7 - t5,
      createMs: t6 - t5,
      serializeMs: t7 - t6,
      bytes,
      largestBytes: largest,
      producerDescriptionsBuilt: factory.producerDescriptionsBuilt,
      peakHeapMiB: deployPeak / MiB,
    },
    peakRssMiB: peakRssMiB(),
  };
}

const stats = (xs: readonly number[]) => ({ min: round(Math.min(...xs)), median: round(median(xs)), max: round(Math.max(...xs)) });

function main(): void {
  const parallelism = Number(process.env['BENCH_PARALLELISM'] ?? 10_000);
  const rounds = Math.max(3, Number(process.env['BENCH_ROUNDS'] ?? 3));
  if (process.argv[2] === '--round') {
    process.stdout.write(JSON.stringify(runRound(parallelism)));
    return;
  }
  const self = fileURLToPath(import.meta.url);
  const results: RoundFigures[] = [];
  for (let i = 0; i < rounds; i++) {
    const child = spawnSync(process.execPath, ['--expose-gc', '--max-old-space-size=4096', self, '--round'], {
      encoding: 'utf8',
      env: process.env,
      maxBuffer: 16 * MiB,
    });
    if (child.status !== 0) throw new Error(`round ${i + 1} failed (exit ${child.status ?? child.signal}): ${child.stderr}`);
    const r = JSON.parse(child.stdout) as RoundFigures;
    results.push(r);
    process.stdout.write(
      `round ${i + 1}: build ${round(r.build.ms)} ms, peak heap ${round(r.build.peakHeapMiB)} MiB; deploy ${round(r.deploy.ms)} ms, ${round(r.deploy.bytes / MiB)} MiB serialized\n`,
    );
  }
  const buildMs = stats(results.map((r) => r.build.ms));
  const heap = stats(results.map((r) => r.build.peakHeapMiB));
  const ratio = (s: { min: number; median: number; max: number }, target: number) => ({
    min: round(s.min / target, 3),
    median: round(s.median / target, 3),
    max: round(s.max / target, 3),
  });
  const figures = {
    parallelism,
    rounds,
    note: 'indicative only unless measured on a quiet machine',
    build: {
      targetMs: TARGET_BUILD_MS,
      ms: buildMs,
      ratioToTarget: ratio(buildMs, TARGET_BUILD_MS),
      parseMs: stats(results.map((r) => r.build.parseMs)),
      validateMs: stats(results.map((r) => r.build.validateMs)),
      executionGraphMs: stats(results.map((r) => r.build.executionGraphMs)),
      regionsMs: stats(results.map((r) => r.build.regionsMs)),
      targetHeapMiB: TARGET_HEAP_MIB,
      peakHeapMiB: heap,
      heapRatioToTarget: ratio(heap, TARGET_HEAP_MIB),
      retainedHeapMiB: stats(results.map((r) => r.build.retainedHeapMiB)),
    },
    deploy: {
      tasks: 2 * parallelism,
      ms: stats(results.map((r) => r.deploy.ms)),
      createMs: stats(results.map((r) => r.deploy.createMs)),
      serializeMs: stats(results.map((r) => r.deploy.serializeMs)),
      serializedMiB: stats(results.map((r) => r.deploy.bytes / MiB)),
      largestDescriptorKiB: stats(results.map((r) => r.deploy.largestBytes / 1024)),
      producerDescriptionsBuilt: stats(results.map((r) => r.deploy.producerDescriptionsBuilt)),
      peakHeapMiB: stats(results.map((r) => r.deploy.peakHeapMiB)),
    },
    peakRssMiB: stats(results.map((r) => r.peakRssMiB)),
  };
  const fmt = (s: { min: number; median: number; max: number }) => `${s.min} / ${s.median} / ${s.max}`;
  process.stdout.write(
    [
      `${parallelism} × ${parallelism} all-to-all, ${rounds} rounds (min / median / max; indicative only on a shared machine)`,
      `submit → ExecutionGraph with regions: ${fmt(buildMs)} ms  = ${fmt(figures.build.ratioToTarget)} × the 1 s target`,
      `  parse ${fmt(figures.build.parseMs)} ms, validate ${fmt(figures.build.validateMs)} ms, ExecutionGraph ${fmt(figures.build.executionGraphMs)} ms, regions etc. ${fmt(figures.build.regionsMs)} ms`,
      `peak heap: ${fmt(heap)} MiB  = ${fmt(figures.build.heapRatioToTarget)} × the 200 MiB target (retained after gc: ${fmt(figures.build.retainedHeapMiB)} MiB)`,
      `deployment descriptors for ${2 * parallelism} tasks: ${fmt(figures.deploy.ms)} ms (create ${fmt(figures.deploy.createMs)}, serialize ${fmt(figures.deploy.serializeMs)}), ` +
        `${fmt(figures.deploy.serializedMiB)} MiB serialized (largest ${fmt(figures.deploy.largestDescriptorKiB)} KiB), heap ${fmt(figures.deploy.peakHeapMiB)} MiB, producer descriptions built: ${fmt(figures.deploy.producerDescriptionsBuilt)}`,
      `child peak RSS (node included): ${fmt(figures.peakRssMiB)} MiB`,
      `figures: ${writeFigures('big-graph', figures)}`,
      '',
    ].join('\n'),
  );
}

main();
