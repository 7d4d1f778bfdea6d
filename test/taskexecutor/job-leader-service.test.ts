import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { FencingToken, JobId, ResourceId } from '../../runtime/core/ids.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { leaseNames } from '../../runtime/ha/lease-store.js';
import { InMemoryLeaseStore } from '../../runtime/memory/in-memory-lease-store.js';
import { JOB_MASTER_METHODS, type JobMasterGateway, type TaskManagerInfo } from '../../runtime/protocol/jobmaster-gateway.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';
import { EndpointName } from '../../runtime/rpc/rpc-service.js';
import { JobLeaderService } from '../../runtime/taskexecutor/job-leader-service.js';
import { TestingJobMasterGateway, type TestingJobMasterGatewayBuilder } from '../support/testing-job-master-gateway.js';
import { advanceInSteps, settle } from '../support/manual-time.js';

const INTERVAL = 100;
const TIMEOUT = 500;
const RETRY = 50;
const job = JobId.of('job-1');
const lease = leaseNames.jobMaster(job);

type Event = { event: 'gained'; address: string; token: number; jobMasterResourceId: string } | { event: 'lost'; cause: string };

interface Harness {
  clock: ManualClock;
  main: MainThread;
  leases: InMemoryLeaseStore;
  service: JobLeaderService;
  events: Event[];
  registrations: Map<string, TaskManagerInfo[]>;
  /** Serves a JobMaster at local://<name> fenced with `token`; `customize` may change its behaviour. */
  jobMaster(name: string, token: number, customize?: (b: TestingJobMasterGatewayBuilder) => void): void;
  /** `name` takes the JobMaster lease (after its holder released it) and serves. */
  leader(name: string, customize?: (b: TestingJobMasterGatewayBuilder) => void): Promise<number>;
  run<T>(fn: () => T): Promise<T>;
  advance(ms: number): Promise<void>;
}

const harnesses: Harness[] = [];
const rpcs: LocalRpcService[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) {
    await h.main.run(() => h.service.stop());
    await h.main.close();
  }
  for (const r of rpcs.splice(0)) await r.close();
});

function harness(): Harness {
  const clock = new ManualClock();
  const main = new MainThread('taskexecutor te-1', clock);
  const network = new LocalRpcNetwork();
  const leases = new InMemoryLeaseStore(clock);
  const teRpc = new LocalRpcService(network, 'te-1', { clock, timeoutMs: 1_000 });
  rpcs.push(teRpc);
  const events: Event[] = [];
  const registrations = new Map<string, TaskManagerInfo[]>();
  let holder: string | undefined;
  const service = new JobLeaderService({
    ownerName: 'taskexecutor te-1',
    rpc: teRpc,
    leaseStore: leases,
    clock,
    mainThread: main,
    logger: silentLogger,
    taskManagerInfo: () => ({ resourceId: ResourceId.of('te-1'), address: teRpc.address, dataAddress: '127.0.0.1:1' }),
    retryIntervalMs: RETRY,
    heartbeatIntervalMs: INTERVAL,
    heartbeatTimeoutMs: TIMEOUT,
    listener: {
      jobManagerGainedLeadership: (jobId, leader) => {
        expect(main.isInMainThread()).toBe(true);
        expect(jobId).toBe(job);
        events.push({ event: 'gained', address: leader.address, token: leader.token, jobMasterResourceId: leader.jobMasterResourceId });
      },
      jobManagerLostLeadership: (jobId, cause) => {
        expect(main.isInMainThread()).toBe(true);
        expect(jobId).toBe(job);
        events.push({ event: 'lost', cause });
      },
    },
  });
  const h: Harness = {
    clock,
    main,
    leases,
    service,
    events,
    registrations,
    jobMaster(name, token, customize) {
      const rpc = new LocalRpcService(network, name, { clock });
      rpcs.push(rpc);
      const builder = TestingJobMasterGateway.builder(name).setRegisterTaskManagerFunction(async (info) => {
        registrations.set(name, [...(registrations.get(name) ?? []), info]);
        return { jobMasterResourceId: ResourceId.of(name) };
      });
      customize?.(builder);
      rpc.serve<JobMasterGateway>(EndpointName.JOB_MASTER, builder.build(), { methods: JOB_MASTER_METHODS, fencingToken: FencingToken.of(token) });
    },
    async leader(name, customize) {
      if (holder !== undefined) {
        const old = await leases.get(lease);
        await leases.release(lease, holder, old!.epoch);
      }
      const won = await leases.tryAcquire(lease, name, `local://${name}`, 60_000);
      holder = name;
      h.jobMaster(name, won!.epoch, customize);
      return won!.epoch;
    },
    run: (fn) => main.run(fn),
    advance: (ms) => advanceInSteps(clock, ms),
  };
  harnesses.push(h);
  return h;
}

/** Beats for the registered leader every interval, as its JobMaster would, for `ms`. */
async function beat(h: Harness, ms: number): Promise<void> {
  for (let done = 0; done < ms; done += INTERVAL) {
    await h.advance(INTERVAL);
    await h.run(() => h.service.heartbeatFromJobManager(job));
  }
}

describe('JobLeaderService', () => {
  it('registers at the leader a slot request names and reports it gained', async () => {
    const h = harness();
    h.jobMaster('jm-1', 7);
    await h.run(() => h.service.addJob(job, { address: 'local://jm-1', token: FencingToken.of(7) }));
    await settle();
    expect(h.events).toEqual([{ event: 'gained', address: 'local://jm-1', token: 7, jobMasterResourceId: 'jm-1' }]);
    expect(h.registrations.get('jm-1')).toEqual([{ resourceId: 'te-1', address: 'local://te-1', dataAddress: '127.0.0.1:1' }]);
    expect(h.service.state(job)).toEqual({ phase: 'registered', leader: { address: 'local://jm-1', token: 7 } });
    // The same leader named again changes nothing.
    await h.run(() => h.service.addJob(job, { address: 'local://jm-1', token: FencingToken.of(7) }));
    await settle();
    expect(h.registrations.get('jm-1')).toHaveLength(1);
  });

  it('finds the leader by its lease, looking again every retry interval until there is one', async () => {
    const h = harness();
    await h.run(() => h.service.addJob(job));
    await h.advance(5 * RETRY);
    expect(h.events).toEqual([]);
    expect(h.service.state(job)?.phase).toBe('looking');
    const token = await h.leader('jm-1');
    await h.advance(RETRY);
    expect(h.events).toEqual([{ event: 'gained', address: 'local://jm-1', token, jobMasterResourceId: 'jm-1' }]);
  });

  it('reports the leader lost when its heartbeats stop, and registers again at the leader the lease names', async () => {
    const h = harness();
    const token = await h.leader('jm-1');
    await h.run(() => h.service.addJob(job));
    await settle();
    await beat(h, 3 * TIMEOUT);
    expect(h.events.map((e) => e.event)).toEqual(['gained']);
    await h.advance(TIMEOUT);
    expect(h.events[1]).toEqual({ event: 'lost', cause: expect.stringContaining('JobMaster heartbeat: no heartbeat from job-1 for 500 ms') });
    expect(h.events[2]).toEqual({ event: 'gained', address: 'local://jm-1', token, jobMasterResourceId: 'jm-1' });
    expect(h.registrations.get('jm-1')).toHaveLength(2);
  });

  it('looks the leader up at once when a call carries a newer token: the old one is lost, the new one gained', async () => {
    const h = harness();
    await h.leader('jm-1');
    await h.run(() => h.service.addJob(job));
    await settle();
    const newer = await h.leader('jm-2');
    // No timer runs: only the fenced call makes it look.
    await h.run(() => h.service.leaderMayHaveChanged(job, FencingToken.of(newer)));
    await settle();
    expect(h.events).toEqual([
      { event: 'gained', address: 'local://jm-1', token: 1, jobMasterResourceId: 'jm-1' },
      { event: 'lost', cause: `JobMaster leadership moved to local://jm-2 (token ${newer}), found through lease jm/job-1` },
      { event: 'gained', address: 'local://jm-2', token: newer, jobMasterResourceId: 'jm-2' },
    ]);
    // An older token is just a stale caller: nothing to look for.
    await h.run(() => h.service.leaderMayHaveChanged(job, FencingToken.of(1)));
    await settle();
    expect(h.events).toHaveLength(3);
  });

  it('follows a slot request to a newer leader and ignores one naming an older leader', async () => {
    const h = harness();
    h.jobMaster('jm-1', 1);
    h.jobMaster('jm-2', 2);
    await h.run(() => h.service.addJob(job, { address: 'local://jm-1', token: FencingToken.of(1) }));
    await settle();
    await h.run(() => h.service.addJob(job, { address: 'local://jm-2', token: FencingToken.of(2) }));
    await settle();
    await h.run(() => h.service.addJob(job, { address: 'local://jm-1', token: FencingToken.of(1) }));
    await settle();
    expect(h.events.map((e) => (e.event === 'gained' ? `gained ${e.address}` : 'lost'))).toEqual(['gained local://jm-1', 'lost', 'gained local://jm-2']);
    expect(h.registrations.get('jm-1')).toHaveLength(1);
  });

  it('retries a failed registration soon (a new leader serves a moment after its lease names it), then backs off to the retry interval', async () => {
    const h = harness();
    let refusals = 5;
    const tries: number[] = [];
    await h.leader('jm-1', (b) =>
      b.setRegisterTaskManagerFunction(async () => {
        tries.push(h.clock.now());
        if (refusals-- > 0) throw new Error('not ready');
        return { jobMasterResourceId: ResourceId.of('jm-1') };
      }),
    );
    await h.run(() => h.service.addJob(job));
    await settle();
    expect(h.events).toEqual([]);
    expect(h.service.state(job)?.phase).toBe('looking');
    await h.advance(20 + 40 + RETRY * 3);
    expect(h.events.map((e) => e.event)).toEqual(['gained']);
    // 20 ms, doubling, at most the retry interval (50 ms here).
    expect(tries.slice(1).map((t, i) => t - tries[i]!)).toEqual([20, 40, RETRY, RETRY, RETRY]);
  });

  it('ignores the late answer of a registration it gave up for a newer leader', async () => {
    const h = harness();
    let answerOld: (() => void) | undefined;
    h.jobMaster('jm-1', 1, (b) =>
      b.setRegisterTaskManagerFunction(() => new Promise((resolve) => (answerOld = () => resolve({ jobMasterResourceId: ResourceId.of('jm-1') })))),
    );
    h.jobMaster('jm-2', 2);
    await h.run(() => h.service.addJob(job, { address: 'local://jm-1', token: FencingToken.of(1) }));
    await settle();
    await h.run(() => h.service.addJob(job, { address: 'local://jm-2', token: FencingToken.of(2) }));
    await settle();
    answerOld!();
    await settle();
    expect(h.events).toEqual([{ event: 'gained', address: 'local://jm-2', token: 2, jobMasterResourceId: 'jm-2' }]);
    expect(h.service.state(job)?.leader).toEqual({ address: 'local://jm-2', token: 2 });
  });

  it('after removeJob says nothing more about the job and stops looking', async () => {
    const h = harness();
    await h.leader('jm-1');
    await h.run(() => h.service.addJob(job));
    await settle();
    await h.run(() => h.service.removeJob(job));
    await h.advance(3 * TIMEOUT);
    expect(h.events.map((e) => e.event)).toEqual(['gained']);
    expect(h.service.state(job)).toBeUndefined();
    expect(h.registrations.get('jm-1')).toHaveLength(1);
  });
});
