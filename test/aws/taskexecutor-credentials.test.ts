// On the AWS backend (ECS emulator), no process that runs user code holds a credential beyond its own
// identity. A job reads /proc/self/environ, every environment variable and its command line (on the
// emulator the task role's credentials are in its environment too); while it and another job run, each
// string is tried as an RPC bearer against the JobManagers acting as another TaskExecutor (the job's own
// key, at the other job, even as itself), as a REST
// bearer against the Dispatcher and as the other job's data-plane key: all refused. The cluster secret is
// among none of them.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { jobDataKey, taskExecutorBearer } from '../../runtime/core/cluster-keys.js';
import { JobId } from '../../runtime/core/ids.js';
import { waitFor } from '../support/cluster-processes.js';
import { bearersOf, candidateStrings, dataHandshake, restStatus, rpcStatus } from '../support/credential-attacks.js';
import { AWS_TEST_SECRET, startAwsTestCluster, type AwsTestCluster } from './aws-test-cluster.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/jobs');
let cluster: AwsTestCluster;

beforeAll(async () => {
  cluster = await startAwsTestCluster();
}, 120_000);

afterAll(async () => {
  expect(await cluster.close()).toEqual([]);
});

/** Every JSON log line the emulator's tasks wrote so far. */
function taskLogLines(): Record<string, unknown>[] {
  const dir = join(cluster.work, 'logs');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((file) =>
    readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>),
  );
}

const environOf = (pid: number): string[] =>
  readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .filter((e) => e !== '');

describe('TaskExecutor credentials on the AWS backend (emulators)', () => {
  it('a job finds no cluster secret in its task, and nothing it finds acts as another TaskExecutor, opens the REST API or reads another job', async () => {
    const { api, adapter } = await cluster.front();
    const { work, emulators, ecs } = cluster;
    const submit = async (file: string, args: string[], parallelism: number): Promise<string> => {
      const { code, sha256 } = await bundleJobFile(join(FIXTURES, file));
      const definition = loadJobDefinition(await importLibrary(code, join(work, 'client-cache')), 'default');
      const jobGraph = buildJobGraph(definition, {
        jobId: JobId.random(),
        args,
        exportName: 'default',
        library: { sha256, sizeBytes: code.length },
        defaultParallelism: parallelism,
      });
      const res = await api('POST', '/jobs', { jobGraph, library: Buffer.from(code).toString('base64') });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      return res.body.jobId as string;
    };
    const findingsPath = join(work, 'findings.json');
    const release = join(work, 'release');
    const other = await submit('e2e-slow.ts', [`s3://${emulators.bucket}/out/slow`], 2);
    const probe = await submit('credential-probe.ts', [findingsPath, release], 1);
    try {
      await waitFor(() => existsSync(findingsPath), 'the probe job to report what its task holds', 90_000, 100);
      const started = (jobId: string) =>
        taskLogLines().find((l) => l['msg'] === 'TaskExecutor started' && l['jobId'] === jobId) as { resourceId: string; dataAddress: string } | undefined;
      const serving = (jobId: string) =>
        taskLogLines().find((l) => l['msg'] === 'ResourceManager serving' && l['jobId'] === jobId) as { address: string } | undefined;
      const otherTe = await waitFor(() => started(other), "the other job's TaskExecutor to start", 60_000, 100);
      const probeTe = await waitFor(() => started(probe), "the probe job's TaskExecutor to start", 60_000, 100);
      const [otherJm, probeJm] = [
        (await waitFor(() => serving(other), "the other job's JobManager", 30_000, 100)).address,
        (await waitFor(() => serving(probe), "the probe job's JobManager", 30_000, 100)).address,
      ];
      await waitFor(async () => (await api('GET', `/jobs/${other}`)).body.tasks?.running > 0, "the other job's tasks to run", 60_000, 200);

      // No TaskExecutor task has the secret in its environment; the JobManager tasks do.
      const tasks = ecs.livePids().map((pid) => ({ pid, environ: environOf(pid) }));
      const taskExecutors = tasks.filter((t) => t.environ.some((e) => e.startsWith('FLOE_RESOURCE_ID=te-')));
      expect(taskExecutors.length).toBeGreaterThanOrEqual(2);
      for (const te of taskExecutors)
        expect(
          te.environ.filter((e) => e.includes(AWS_TEST_SECRET)),
          `TaskExecutor pid ${te.pid}`,
        ).toEqual([]);
      expect(tasks.some((t) => !taskExecutors.includes(t) && t.environ.some((e) => e.includes(AWS_TEST_SECRET)))).toBe(true);

      const findings = JSON.parse(readFileSync(findingsPath, 'utf8')) as {
        pid: number;
        environ: string[];
        cmdline: string[];
        variables: string[];
        stateDirEntries: string[];
      };
      expect(taskExecutors.map((t) => t.pid)).toContain(findings.pid);
      expect(findings.stateDirEntries).toEqual([]);
      const everything = [...findings.environ, ...findings.cmdline, ...findings.variables];
      expect(everything.filter((s) => s.includes(AWS_TEST_SECRET))).toEqual([]);
      // What the task role gives, on the emulator as environment: among the strings tried below.
      expect(findings.environ.some((e) => e.startsWith('AWS_SECRET_ACCESS_KEY='))).toBe(true);
      const ownKey = findings.environ.find((e) => e.startsWith('FLOE_TASK_EXECUTOR_KEY='))?.slice('FLOE_TASK_EXECUTOR_KEY='.length);
      expect(ownKey, 'the TaskExecutor was given its own key').toMatch(/^[0-9a-f]{64}$/);
      const candidates = candidateStrings(everything);

      const victim = otherTe.resourceId;
      const registration = { resourceId: victim, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9', numberOfSlots: 8 };
      const tries: [string, string, string, unknown[]][] = [
        [probeJm, 'resourcemanager', 'registerTaskExecutor', [registration]],
        [otherJm, 'resourcemanager', 'registerTaskExecutor', [registration]],
        [probeJm, 'jobmaster', 'registerTaskManager', [registration]],
        [otherJm, 'jobmaster', 'offerSlots', [victim, []]],
      ];
      // Its own key is valid for its job and still opens nothing there as another TaskExecutor (403); at
      // the other job it is no credential at all, even acting as itself (401).
      const ownBearer = taskExecutorBearer({ resourceId: probeTe.resourceId, jobId: probe, key: ownKey! });
      const asItself = { resourceId: probeTe.resourceId, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9', numberOfSlots: 8 };
      const withOwnKey: [string, string, string, unknown[]][] = [
        ...tries,
        [otherJm, 'resourcemanager', 'registerTaskExecutor', [asItself]],
        [otherJm, 'jobmaster', 'registerTaskManager', [asItself]],
        [otherJm, 'jobmaster', 'offerSlots', [probeTe.resourceId, []]],
      ];
      for (const [address, endpoint, method, args] of withOwnKey) {
        const expected = address === probeJm ? 403 : 401;
        expect(
          await rpcStatus(address, endpoint, method, args, ownBearer),
          `${endpoint}.${method} at ${address === probeJm ? 'its own' : 'the other'} job with its own key`,
        ).toBe(expected);
      }

      const rpcAnswers = new Map<number, number>();
      const restAnswers = new Map<number, number>();
      const count = (m: Map<number, number>, status: number): void => void m.set(status, (m.get(status) ?? 0) + 1);
      for (const candidate of candidates) {
        const bearers = bearersOf(candidate, [victim, probeTe.resourceId], [probe, other]).filter((b) => b !== ownBearer);
        const answers = await Promise.all(
          bearers.flatMap((bearer) => tries.map(([address, endpoint, method, args]) => rpcStatus(address, endpoint, method, args, bearer))),
        );
        answers.forEach((s) => count(rpcAnswers, s));
        count(restAnswers, await restStatus(`${adapter.url}/jobs`, candidate));
      }
      expect([...rpcAnswers.keys()]).toEqual([401]);
      // The API takes IAM-signed requests only: a bearer, whatever it holds, is refused before the Dispatcher.
      expect(
        [...restAnswers.keys()].every((s) => s === 401 || s === 403),
        JSON.stringify([...restAnswers]),
      ).toBe(true);

      const realKey = await dataHandshake(otherTe.dataAddress, other, jobDataKey(AWS_TEST_SECRET, other), 2_000);
      expect(realKey.keyIsTheJobs, 'the handshake check recognises the real key').toBe(true);
      const outcomes = await Promise.all(
        candidates.map(async (candidate) => ({ candidate: candidate.slice(0, 40), ...(await dataHandshake(otherTe.dataAddress, other, candidate)) })),
      );
      expect(outcomes.filter((o) => !(o.challenged && !o.keyIsTheJobs && o.closedAfterProof))).toEqual([]);
      expect(await dataHandshake(otherTe.dataAddress, probe, ownKey!)).toEqual({ challenged: false, keyIsTheJobs: false, closedAfterProof: false });
    } finally {
      writeFileSync(release, '');
      await api('PATCH', `/jobs/${other}?mode=cancel`);
    }
    const ended = (jobId: string) =>
      waitFor(
        async () => {
          const { body } = await api('GET', `/jobs/${jobId}`);
          return ['FINISHED', 'FAILED', 'CANCELED'].includes(body.status) ? body : undefined;
        },
        `job ${jobId} to end`,
        60_000,
        200,
      );
    expect((await ended(probe)).status, JSON.stringify((await api('GET', `/jobs/${probe}/exceptions`)).body)).toBe('FINISHED');
    expect((await ended(other)).status).toBe('CANCELED');
    await waitFor(() => ecs.livePids().length === 0, 'every task process to exit', 30_000);
  }, 240_000);
});
