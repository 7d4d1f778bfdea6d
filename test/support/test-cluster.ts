// An embedded cluster for end-to-end tests: a Dispatcher in the test process (JobManagers and
// TaskExecutors as real child processes), its REST API, and submitting bundled fixture jobs.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { loadConfig } from '../../runtime/core/config.js';
import { JobId } from '../../runtime/core/ids.js';
import { createLogger } from '../../runtime/core/logger.js';
import { startEmbeddedDispatcher, type EmbeddedDispatcher } from '../../runtime/local/embedded-dispatcher.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { embeddedPaths } from '../../runtime/local/embedded-services.js';
import { killLeftovers, processesOfCluster, waitFor } from './cluster-processes.js';

export const FIXTURE_JOBS = join(import.meta.dirname, '../fixtures/jobs');

export interface TestCluster {
  readonly stateDir: string;
  /** A scratch folder for inputs and outputs. */
  readonly work: string;
  readonly dispatcher: EmbeddedDispatcher;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Bundles a fixture job (once per file) and builds its graph under `jobId` (default: a random id). */
  build(file: string, exportName: string, args: string[], parallelism: number, jobId?: string): Promise<{ jobGraph: JobGraph; library: string }>;
  /** Bundles a fixture job, builds its graph (optionally checked by `inspect`) and submits it. */
  submit(file: string, exportName: string, args: string[], parallelism: number, inspect?: (graph: JobGraph) => void): Promise<string>;
  awaitTerminal(jobId: string, timeoutMs?: number): Promise<any>;
  /** The job's exceptions, for assertion messages. */
  exceptions(jobId: string): Promise<string>;
  noProcessLeft(): Promise<void>;
  /**
   * Waits until nothing of the cluster's jobs is left: no JobManager or TaskExecutor process, no
   * TaskExecutor folder (partition files, library cache), no staging folder beside a sink target in
   * `work`. Throws naming what stayed.
   */
  nothingLeft(): Promise<void>;
  /** Stops the Dispatcher and returns how many of the cluster's processes had to be killed. */
  close(): Promise<number>;
}

export async function startTestCluster(name: string, config: Record<string, string | number> = {}): Promise<TestCluster> {
  const stateDir = mkdtempSync(join(tmpdir(), `floe-${name}-`));
  const work = join(stateDir, 'work');
  mkdirSync(work);
  const dispatcher = await startEmbeddedDispatcher({
    stateDir,
    // No warm pool unless a test asks for one: most tests check that a job leaves no process behind
    // (test/e2e/warm-pool.test.ts is about the pool).
    config: loadConfig({
      'taskmanager.numberOfTaskSlots': 2,
      'heartbeat.interval': 300,
      'heartbeat.timeout': 10_000,
      'slot.request.timeout': 30_000,
      'cluster.warm-pool.jobmanagers': 0,
      ...config,
    }),
    logger: createLogger({ process: 'test-dispatcher' }),
  });
  const api: TestCluster['api'] = async (method, path, body) => {
    const res = await fetch(dispatcher.url + path, {
      method,
      headers: { authorization: `Bearer ${dispatcher.secret}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: await res.json() };
  };
  const bundles = new Map<string, Promise<{ code: Uint8Array; sha256: string }>>();
  const build: TestCluster['build'] = async (file, exportName, args, parallelism, jobId) => {
    let bundle = bundles.get(file);
    if (bundle === undefined) bundles.set(file, (bundle = bundleJobFile(join(FIXTURE_JOBS, file))));
    const { code, sha256 } = await bundle;
    const definition = loadJobDefinition(await importLibrary(code, join(stateDir, 'client-cache')), exportName);
    const jobGraph = buildJobGraph(definition, {
      jobId: jobId === undefined ? JobId.random() : JobId.of(jobId),
      args,
      exportName,
      library: { sha256, sizeBytes: code.length },
      defaultParallelism: parallelism,
    });
    return { jobGraph, library: Buffer.from(code).toString('base64') };
  };
  return {
    stateDir,
    work,
    dispatcher,
    api,
    build,
    async submit(file, exportName, args, parallelism, inspect) {
      const { jobGraph, library } = await build(file, exportName, args, parallelism);
      inspect?.(jobGraph);
      const res = await api('POST', '/jobs', { jobGraph, library });
      if (res.status !== 202) throw new Error(`submission refused: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.jobId as string;
    },
    awaitTerminal: (jobId, timeoutMs = 60_000) =>
      waitFor(
        async () => {
          const { body } = await api('GET', `/jobs/${jobId}`);
          return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
        },
        `job ${jobId} to end`,
        timeoutMs,
        100,
      ),
    exceptions: async (jobId) => JSON.stringify((await api('GET', `/jobs/${jobId}/exceptions`)).body),
    noProcessLeft: async () => {
      await waitFor(() => processesOfCluster(stateDir).length === 0, 'every JobManager and TaskExecutor process to exit', 20_000);
    },
    async nothingLeft() {
      await waitFor(() => processesOfCluster(stateDir).length === 0, 'every JobManager and TaskExecutor process to exit', 20_000);
      const teDirs = embeddedPaths.taskExecutors(stateDir);
      const left = (): string[] => [
        ...(existsSync(teDirs) ? readdirSync(teDirs).map((d) => `TaskExecutor folder ${join(teDirs, d)}`) : []),
        ...readdirSync(work)
          .filter((f) => f.includes('.staging-'))
          .map((f) => `staging folder ${join(work, f)}`),
      ];
      // Folders go right after their process: give the launcher a moment.
      await waitFor(() => left().length === 0, 'no TaskExecutor or staging folder left', 5_000).catch(() => {
        throw new Error(`left behind: ${left().join(', ')}`);
      });
    },
    async close() {
      await dispatcher.close();
      const leftovers = killLeftovers(stateDir);
      rmSync(stateDir, { recursive: true, force: true });
      return leftovers;
    },
  };
}
