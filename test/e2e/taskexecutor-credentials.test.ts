// On a local cluster no TaskExecutor holds the cluster secret: not in its process environment, not in
// its slot workers'. A job gathers every string its process hands it and, while it and another job run,
// each is tried as an RPC bearer acting as another TaskExecutor, as a REST bearer and as another job's
// data-plane key: all are refused. (Locally user code still runs as the user who started the cluster and
// can read the state dir; the README says so.)
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobDataKey, taskExecutorBearer } from '../../runtime/core/cluster-keys.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { openEmbeddedServices } from '../../runtime/local/embedded-services.js';
import { waitFor, workerPids } from '../support/cluster-processes.js';
import { bearersOf, candidateStrings, dataHandshake, restStatus, rpcStatus } from '../support/credential-attacks.js';
import { startTestCluster, type TestCluster } from '../support/test-cluster.js';

let cluster: TestCluster;
const levelBefore = process.env['FLOE_LOG_LEVEL'];

beforeAll(async () => {
  // Info lines name each TaskExecutor's data address; the cluster's processes inherit the level.
  process.env['FLOE_LOG_LEVEL'] = 'info';
  cluster = await startTestCluster('te-credentials');
});

afterAll(async () => {
  if (levelBefore === undefined) delete process.env['FLOE_LOG_LEVEL'];
  else process.env['FLOE_LOG_LEVEL'] = levelBefore;
  expect(await cluster.close()).toBe(0);
});

/** The environment of process `pid`, entry by entry, as /proc shows it to anyone of the same user. */
const environOf = (pid: number): string[] =>
  readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .filter((e) => e !== '');

/** The TaskExecutors a job's log folder names: id and data address from each one's start line. */
function taskExecutorsOf(stateDir: string, jobId: string): { resourceId: string; dataAddress: string }[] {
  const dir = join(stateDir, 'logs', jobId);
  if (!existsSync(dir)) return [];
  const found: { resourceId: string; dataAddress: string }[] = [];
  for (const file of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (!line.startsWith('{') || !line.includes('"TaskExecutor started"')) continue;
      const entry = JSON.parse(line) as { resourceId: string; dataAddress: string };
      found.push({ resourceId: entry.resourceId, dataAddress: entry.dataAddress });
    }
  }
  return found;
}

describe('TaskExecutor credentials on a local cluster', () => {
  it('no TaskExecutor has the cluster secret, and nothing a job finds acts as another TaskExecutor, opens the REST API or reads another job', async () => {
    const { stateDir, work, dispatcher } = cluster;
    const secret = dispatcher.secret;
    const findingsPath = join(work, 'findings.json');
    const release = join(work, 'release');

    const other = await cluster.submit('e2e-slow.ts', 'default', [join(work, 'slow-out')], 2);
    const probe = await cluster.submit('credential-probe.ts', 'default', [findingsPath, release], 1);
    try {
      // Both jobs are busy: the probe's task holds what it found, the other job's tasks run.
      await waitFor(() => existsSync(findingsPath), 'the probe job to report what its process holds', 60_000);
      const otherTe = await waitFor(() => taskExecutorsOf(stateDir, other)[0], "the other job's TaskExecutor to start", 60_000);
      const probeTe = await waitFor(() => taskExecutorsOf(stateDir, probe)[0], "the probe job's TaskExecutor to start", 60_000);
      await waitFor(async () => (await cluster.api('GET', `/jobs/${other}`)).body.tasks?.running > 0, "the other job's tasks to run", 60_000);

      // /proc/<pid>/environ of every TaskExecutor process (a slot worker is a thread of one): no secret.
      // The JobManagers hold it, which shows the reading finds it where it is.
      const pids = workerPids(stateDir);
      expect(pids.taskExecutors.length).toBeGreaterThanOrEqual(2);
      for (const pid of pids.taskExecutors)
        expect(
          environOf(pid).filter((e) => e.includes(secret)),
          `TaskExecutor pid ${pid}`,
        ).toEqual([]);
      expect(pids.jobManagers.some((pid) => environOf(pid).some((e) => e.includes(secret)))).toBe(true);

      // What user code found in its worker thread: /proc/self/environ, process.env, its command line.
      const findings = JSON.parse(readFileSync(findingsPath, 'utf8')) as {
        pid: number;
        environ: string[];
        cmdline: string[];
        variables: string[];
        stateDirEntries: string[];
      };
      expect(pids.taskExecutors).toContain(findings.pid);
      // Locally user code runs as the user who started the cluster: the state dir, its secret file among
      // it, is within its reach (the README says so); no worker is handed a credential in its environment.
      expect(findings.stateDirEntries).toContain('secret');
      const everything = [...findings.environ, ...findings.cmdline, ...findings.variables];
      expect(everything.filter((s) => s.includes(secret))).toEqual([]);
      const ownKey = findings.environ.find((e) => e.startsWith('FLOE_TASK_EXECUTOR_KEY='))?.slice('FLOE_TASK_EXECUTOR_KEY='.length);
      expect(ownKey, 'the TaskExecutor was given its own key').toMatch(/^[0-9a-f]{64}$/);
      expect(findings.variables.some((v) => v.startsWith('FLOE_TASK_EXECUTOR_KEY='))).toBe(false);
      const candidates = candidateStrings(everything);
      expect(candidates.length).toBeGreaterThan(10);

      const services = openEmbeddedServices(stateDir);
      const leaders = await Promise.all(
        [leaseNames.resourceManager(probe), leaseNames.jobMaster(probe), leaseNames.resourceManager(other), leaseNames.jobMaster(other)].map(
          async (name) => (await services.leaseStore.get(name))!.address,
        ),
      );
      await services.close();
      const [probeRm, probeJm, otherRm, otherJm] = leaders as [string, string, string, string];
      const victim = otherTe.resourceId;
      const asVictim = {
        registration: { resourceId: victim, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9', numberOfSlots: 8 },
        info: { resourceId: victim, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9' },
      };
      const tries: [string, string, string, unknown[]][] = [
        [probeRm, 'resourcemanager', 'registerTaskExecutor', [asVictim.registration]],
        [otherRm, 'resourcemanager', 'registerTaskExecutor', [asVictim.registration]],
        [probeJm, 'jobmaster', 'registerTaskManager', [asVictim.info]],
        [otherJm, 'jobmaster', 'offerSlots', [victim, []]],
      ];

      // The TaskExecutor's own key is valid for its job, and still opens nothing there as another
      // TaskExecutor (403); at the other job it is no credential at all, even acting as itself (401).
      const ownBearer = taskExecutorBearer({ resourceId: probeTe.resourceId, jobId: probe, key: ownKey! });
      const asItself = { resourceId: probeTe.resourceId, address: 'http://127.0.0.1:9', dataAddress: '127.0.0.1:9', numberOfSlots: 8 };
      const atOtherJob: [string, string, string, unknown[]][] = [
        ...tries.slice(0, 2),
        [otherRm, 'resourcemanager', 'registerTaskExecutor', [asItself]],
        [otherRm, 'resourcemanager', 'sendSlotReport', [probeTe.resourceId, { resourceId: probeTe.resourceId, slots: [], heldPartitions: 0 }]],
        [otherJm, 'jobmaster', 'registerTaskManager', [asItself]],
        [otherJm, 'jobmaster', 'offerSlots', [probeTe.resourceId, []]],
        tries[3]!,
      ];
      for (const [address, endpoint, method, args] of atOtherJob) {
        const expected = address === probeRm || address === probeJm ? 403 : 401;
        expect(
          await rpcStatus(address, endpoint, method, args, ownBearer),
          `${endpoint}.${method} at ${address === probeRm || address === probeJm ? 'its own' : 'the other'} job with its own key`,
        ).toBe(expected);
      }

      const statuses = new Map<number, number>();
      const count = (status: number): void => void statuses.set(status, (statuses.get(status) ?? 0) + 1);
      for (const candidate of candidates) {
        const bearers = bearersOf(candidate, [victim, probeTe.resourceId], [probe, other]).filter((b) => b !== ownBearer);
        const answers = await Promise.all([
          ...bearers.flatMap((bearer) => tries.map(([address, endpoint, method, args]) => rpcStatus(address, endpoint, method, args, bearer))),
          restStatus(`${dispatcher.url}/jobs`, candidate),
        ]);
        answers.forEach(count);
      }
      expect([...statuses.keys()].sort()).toEqual([401]);

      // The other job's data: a handshake with any found string as its key is refused, and the probe's
      // own job is not served by the other job's TaskExecutor at all.
      const realKey = await dataHandshake(otherTe.dataAddress, other, jobDataKey(secret, other), 2_000);
      expect(realKey.keyIsTheJobs, 'the handshake check recognises the real key').toBe(true);
      const outcomes = await Promise.all(
        candidates.map(async (candidate) => ({ candidate: candidate.slice(0, 40), ...(await dataHandshake(otherTe.dataAddress, other, candidate)) })),
      );
      expect(outcomes.filter((o) => !(o.challenged && !o.keyIsTheJobs && o.closedAfterProof))).toEqual([]);
      expect(await dataHandshake(otherTe.dataAddress, probe, candidates[0]!)).toEqual({ challenged: false, keyIsTheJobs: false, closedAfterProof: false });
    } finally {
      writeFileSync(release, '');
      await cluster.api('PATCH', `/jobs/${other}?mode=cancel`);
    }
    expect((await cluster.awaitTerminal(probe)).status, await cluster.exceptions(probe)).toBe('FINISHED');
    expect((await cluster.awaitTerminal(other)).status).toBe('CANCELED');
    await cluster.noProcessLeft();
  }, 180_000);
});
