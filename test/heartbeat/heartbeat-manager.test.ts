import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/core/clock.js';
import { RpcConnectionError, RpcTimeoutError } from '../../runtime/core/errors.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { HeartbeatManager } from '../../runtime/heartbeat/heartbeat-manager.js';
import { LocalRpcNetwork, LocalRpcService } from '../../runtime/rpc/local-rpc-service.js';
import { MainThread } from '../../runtime/rpc/main-thread.js';

const INTERVAL = 100;
const TIMEOUT = 500;

/** What node:http gives for a call to a port nothing listens on. */
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
/** What node:http gives when a live server closes a reused keep-alive connection under the request. */
const hangUp = (): Error => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

/** Lets queued main-thread work and promise callbacks run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

interface Harness {
  readonly clock: ManualClock;
  readonly thread: MainThread;
  readonly manager: HeartbeatManager<string>;
  readonly timeouts: { targetId: string; cause: string; atMs: number; onThread: boolean }[];
  readonly payloads: { targetId: string; payload: string; onThread: boolean }[];
  /** Moves the clock in interval-sized steps, letting the main thread catch up after each. */
  advance(ms: number, stepMs?: number): Promise<void>;
}

const harnesses: Harness[] = [];

function harness(options: { rpcFailureThreshold?: number } = {}): Harness {
  const clock = new ManualClock();
  const thread = new MainThread('jobmaster', clock);
  const timeouts: Harness['timeouts'] = [];
  const payloads: Harness['payloads'] = [];
  const manager = new HeartbeatManager<string>({
    ownerName: 'jobmaster',
    intervalMs: INTERVAL,
    timeoutMs: TIMEOUT,
    mainThread: thread,
    clock,
    logger: silentLogger,
    ...options,
    onTimeout: (targetId, cause) => timeouts.push({ targetId, cause, atMs: clock.now(), onThread: thread.isInMainThread() }),
    onPayload: (targetId, payload) => payloads.push({ targetId, payload, onThread: thread.isInMainThread() }),
  });
  const h: Harness = {
    clock,
    thread,
    manager,
    timeouts,
    payloads,
    async advance(ms, stepMs = 10) {
      for (let done = 0; done < ms; done += stepMs) {
        clock.advance(Math.min(stepMs, ms - done));
        await settle();
      }
    },
  };
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  for (const h of harnesses.splice(0)) {
    h.manager.stop();
    await h.thread.close();
  }
});

describe('HeartbeatManager, sender side', () => {
  it('asks at once and then every interval, and hands over each answer on the main thread', async () => {
    const h = harness();
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => `report ${++asked}`);
    await settle();
    expect(asked).toBe(1);
    await h.advance(3 * INTERVAL);
    expect(asked).toBe(4);
    expect(h.payloads.map((p) => p.payload)).toEqual(['report 1', 'report 2', 'report 3', 'report 4']);
    expect(h.payloads.every((p) => p.onThread)).toBe(true);
    expect(h.manager.lastHeardMs('tm-1')).toBe(h.clock.now());
  });

  it('never times out a target that keeps answering', async () => {
    const h = harness();
    h.manager.monitorTarget('tm-1', async () => 'ok');
    await h.advance(5 * TIMEOUT);
    expect(h.timeouts).toEqual([]);
    expect(h.manager.isMonitoring('tm-1')).toBe(true);
  });

  it('counts failed asks as missed beats and fires onTimeout once, after the timeout', async () => {
    const h = harness();
    const start = h.clock.now();
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      throw new RpcTimeoutError('local://tm-1/taskexecutor.heartbeatFromJobManager', 50);
    });
    await h.advance(TIMEOUT - 10);
    expect(h.timeouts).toEqual([]);
    await h.advance(10);
    expect(h.timeouts).toHaveLength(1);
    expect(h.timeouts[0]).toMatchObject({ targetId: 'tm-1', atMs: start + TIMEOUT, onThread: true });
    expect(h.timeouts[0]!.cause).toContain('no heartbeat from tm-1 for 500 ms');
    expect(h.manager.isMonitoring('tm-1')).toBe(false);
    const askedAtTimeout = asked;
    await h.advance(3 * TIMEOUT);
    expect(h.timeouts).toHaveLength(1);
    expect(asked).toBe(askedAtTimeout);
    expect(h.clock.pendingTimers()).toBe(0);
  });

  it('measures the timeout from the last answer, not from the start', async () => {
    const h = harness();
    let answering = true;
    h.manager.monitorTarget('tm-1', async () => {
      if (!answering) throw new Error('busy');
      return 'ok';
    });
    await h.advance(3 * INTERVAL);
    const lastAnswer = h.clock.now();
    answering = false;
    await h.advance(TIMEOUT - 10);
    expect(h.timeouts).toEqual([]);
    await h.advance(10);
    expect(h.timeouts).toHaveLength(1);
    expect(h.timeouts[0]!.atMs).toBe(lastAnswer + TIMEOUT);
  });

  it('reports a refused connection as lost at once, without waiting for the timeout', async () => {
    const h = harness();
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      if (asked === 1) return 'ok';
      throw new RpcConnectionError('http://127.0.0.1:1/rpc/taskexecutor', { cause: refused() });
    });
    await settle();
    const lostAt = h.clock.now() + INTERVAL;
    await h.advance(INTERVAL);
    expect(h.timeouts).toHaveLength(1);
    expect(h.timeouts[0]).toMatchObject({ targetId: 'tm-1', atMs: lostAt, onThread: true });
    expect(h.timeouts[0]!.cause).toContain('connection to tm-1 refused');
    expect(h.timeouts[0]!.cause).toContain('ECONNREFUSED');
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts).toHaveLength(1);
    expect(asked).toBe(2);
  });

  it('does not lose a live target over one call that could not reach it (a socket hang up)', async () => {
    const h = harness();
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      if (asked === 3) throw new RpcConnectionError('http://127.0.0.1:1/taskexecutor.heartbeatFromJobManager', { cause: hangUp() });
      return `beat ${asked}`;
    });
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts).toEqual([]);
    expect(h.manager.isMonitoring('tm-1')).toBe(true);
    expect(h.payloads.map((p) => p.payload)).toContain('beat 4');
  });

  it('loses a target after heartbeat.rpc-failure-threshold calls in a row could not reach it', async () => {
    const h = harness({ rpcFailureThreshold: 3 });
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      if (asked === 1) return 'ok';
      throw new RpcConnectionError('http://127.0.0.1:1/taskexecutor.heartbeatFromJobManager', { cause: hangUp() });
    });
    await settle();
    const firstFailureAt = h.clock.now() + INTERVAL;
    await h.advance(INTERVAL);
    await h.advance(INTERVAL);
    expect(h.timeouts).toEqual([]);
    await h.advance(INTERVAL);
    expect(h.timeouts).toHaveLength(1);
    expect(h.timeouts[0]).toMatchObject({ targetId: 'tm-1', atMs: firstFailureAt + 2 * INTERVAL, onThread: true });
    expect(h.timeouts[0]!.cause).toContain('3 heartbeat calls in a row could not reach tm-1 (heartbeat.rpc-failure-threshold is 3)');
    expect(h.timeouts[0]!.cause).toContain('socket hang up');
    expect(asked).toBe(4);
  });

  it('starts counting failed calls afresh after an answer', async () => {
    const h = harness({ rpcFailureThreshold: 2 });
    // fail, answer, fail, answer, …: never two failures in a row.
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      if (asked % 2 === 0) throw new RpcConnectionError('http://127.0.0.1:1/taskexecutor.heartbeatFromJobManager', { cause: hangUp() });
      return 'ok';
    });
    await h.advance(3 * TIMEOUT);
    expect(asked).toBeGreaterThan(10);
    expect(h.timeouts).toEqual([]);
  });

  it('with the threshold off (-1) leaves unreachable targets to the timeout, but still loses a refused one at once', async () => {
    const h = harness({ rpcFailureThreshold: -1 });
    const start = h.clock.now();
    h.manager.monitorTarget('cut-off', async () => {
      throw new RpcConnectionError('local://cut-off/taskexecutor.heartbeatFromJobManager', {
        cause: Object.assign(new Error('the network is partitioned'), { code: 'EHOSTUNREACH' }),
      });
    });
    h.manager.monitorTarget('gone', async () => {
      throw new RpcConnectionError('local://gone/taskexecutor.heartbeatFromJobManager', { cause: refused() });
    });
    await settle();
    await h.advance(TIMEOUT);
    expect(h.timeouts.map((t) => [t.targetId, t.atMs - start])).toEqual([
      ['gone', 0],
      ['cut-off', TIMEOUT],
    ]);
  });

  it('refuses a threshold of 0', () => {
    const clock = new ManualClock();
    expect(
      () =>
        new HeartbeatManager({
          ownerName: 'x',
          intervalMs: 10,
          timeoutMs: 100,
          rpcFailureThreshold: 0,
          mainThread: new MainThread('x', clock),
          clock,
          logger: silentLogger,
          onTimeout: () => {},
        }),
    ).toThrow(/positive count or -1/);
  });

  it('keeps at most one ask in flight to a slow target', async () => {
    const h = harness();
    let asked = 0;
    let answer: ((v: string) => void) | undefined;
    h.manager.monitorTarget('tm-1', () => {
      asked++;
      return new Promise<string>((r) => (answer = r));
    });
    await h.advance(3 * INTERVAL);
    expect(asked).toBe(1);
    expect(h.manager.outstandingRequests('tm-1')).toBe(1);
    // The late answer still proves the target alive; the next tick asks again.
    answer!('late');
    await settle();
    expect(h.manager.outstandingRequests('tm-1')).toBe(0);
    expect(h.manager.lastHeardMs('tm-1')).toBe(h.clock.now());
    await h.advance(INTERVAL);
    expect(asked).toBe(2);
  });

  it('times out a target whose ask hangs, and asks it nothing more meanwhile', async () => {
    const h = harness();
    let asked = 0;
    h.manager.monitorTarget('tm-1', () => {
      asked++;
      return new Promise<string>(() => {});
    });
    await h.advance(TIMEOUT);
    expect(asked).toBe(1);
    expect(h.timeouts).toHaveLength(1);
    expect(h.timeouts[0]!.cause).toContain('no heartbeat');
  });

  it('ignores the answer of a replaced watch', async () => {
    const h = harness();
    let oldAnswer: ((v: string) => void) | undefined;
    h.manager.monitorTarget('tm-1', () => new Promise<string>((r) => (oldAnswer = r)));
    await settle();
    h.manager.monitorTarget('tm-1', async () => 'new session');
    await settle();
    oldAnswer!('old session');
    await h.advance(INTERVAL);
    expect(h.payloads.map((p) => p.payload)).not.toContain('old session');
    expect(h.payloads.map((p) => p.payload)).toContain('new session');
  });

  it('reports nothing for a target unmonitored before its timeout', async () => {
    const h = harness();
    let asked = 0;
    h.manager.monitorTarget('tm-1', async () => {
      asked++;
      throw new Error('down');
    });
    await h.advance(TIMEOUT / 2);
    h.manager.unmonitorTarget('tm-1');
    const askedBefore = asked;
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts).toEqual([]);
    expect(asked).toBe(askedBefore);
    expect(h.manager.lastHeardMs('tm-1')).toBeUndefined();
  });
});

describe('HeartbeatManager, receiver side', () => {
  it('stays quiet while the peer keeps asking, and reports it lost once it stops', async () => {
    const h = harness();
    h.manager.monitorTarget('rm');
    for (let i = 0; i < 10; i++) {
      await h.advance(INTERVAL);
      h.manager.receiveHeartbeat('rm');
    }
    expect(h.timeouts).toEqual([]);
    const lastBeat = h.clock.now();
    expect(h.manager.lastHeardMs('rm')).toBe(lastBeat);
    await h.advance(TIMEOUT - 10);
    expect(h.timeouts).toEqual([]);
    await h.advance(10);
    expect(h.timeouts).toEqual([
      { targetId: 'rm', cause: expect.stringContaining('no heartbeat from rm for 500 ms') as unknown as string, atMs: lastBeat + TIMEOUT, onThread: true },
    ]);
    // Once lost, a late beat does not bring it back and nothing fires again.
    h.manager.receiveHeartbeat('rm');
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts).toHaveLength(1);
    expect(h.manager.isMonitoring('rm')).toBe(false);
  });

  it('times out a peer that never asks, counting from when monitoring began', async () => {
    const h = harness();
    const start = h.clock.now();
    h.manager.monitorTarget('rm');
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts.map((t) => t.atMs)).toEqual([start + TIMEOUT]);
  });

  it('passes a payload handed to receiveHeartbeat to onPayload, and ignores unknown peers', async () => {
    const h = harness();
    h.manager.monitorTarget('jm');
    h.manager.receiveHeartbeat('jm', 'slot report');
    h.manager.receiveHeartbeat('stranger', 'ignored');
    await settle();
    expect(h.payloads).toEqual([{ targetId: 'jm', payload: 'slot report', onThread: true }]);
    expect(h.manager.isMonitoring('stranger')).toBe(false);
  });
});

describe('HeartbeatManager lifecycle', () => {
  it('stop() cancels every timer and ignores later watches', async () => {
    const h = harness();
    h.manager.monitorTarget('a', async () => 'x');
    h.manager.monitorTarget('b');
    await settle();
    h.manager.stop();
    expect(h.clock.pendingTimers()).toBe(0);
    h.manager.monitorTarget('c');
    await h.advance(2 * TIMEOUT);
    expect(h.timeouts).toEqual([]);
    expect(h.manager.isMonitoring('c')).toBe(false);
  });

  it('rejects a non-positive interval or timeout', () => {
    const clock = new ManualClock();
    expect(
      () =>
        new HeartbeatManager({
          ownerName: 'x',
          intervalMs: 0,
          timeoutMs: 10,
          mainThread: new MainThread('x', clock),
          clock,
          logger: silentLogger,
          onTimeout: () => {},
        }),
    ).toThrow(/must be positive/);
  });
});

describe('HeartbeatManager over LocalRpcService', () => {
  it('a partitioned TaskExecutor is reported lost after heartbeat.rpc-failure-threshold beats', async () => {
    const h = harness({ rpcFailureThreshold: 2 });
    const network = new LocalRpcNetwork();
    const te = new LocalRpcService(network, 'te-1', { timeoutMs: 1_000 });
    const jm = new LocalRpcService(network, 'jm-1', { timeoutMs: 1_000 });
    try {
      let beats = 0;
      te.serve('taskexecutor', { heartbeatFromJobManager: async () => `te-1 beat ${++beats}` }, { methods: ['heartbeatFromJobManager'] });
      const gateway = jm.connect<{ heartbeatFromJobManager(): Promise<string> }>(te.address, 'taskexecutor');
      h.manager.monitorTarget('te-1', () => gateway.heartbeatFromJobManager());
      await h.advance(2 * INTERVAL);
      expect(h.payloads.map((p) => p.payload)).toEqual(['te-1 beat 1', 'te-1 beat 2', 'te-1 beat 3']);
      network.partition(te.address);
      const partitionedAt = h.clock.now();
      await h.advance(INTERVAL);
      expect(h.timeouts).toEqual([]);
      await h.advance(INTERVAL);
      expect(h.timeouts).toHaveLength(1);
      expect(h.timeouts[0]!.atMs).toBe(partitionedAt + 2 * INTERVAL);
      expect(h.timeouts[0]!.cause).toContain('partitioned');
    } finally {
      await Promise.all([te.close(), jm.close()]);
    }
  });

  it('a TaskExecutor whose service is gone (nothing listens) is reported lost at the next beat', async () => {
    const h = harness({ rpcFailureThreshold: 2 });
    const network = new LocalRpcNetwork();
    const te = new LocalRpcService(network, 'te-1', { timeoutMs: 1_000 });
    const jm = new LocalRpcService(network, 'jm-1', { timeoutMs: 1_000 });
    try {
      te.serve('taskexecutor', { heartbeatFromJobManager: async () => 'beat' }, { methods: ['heartbeatFromJobManager'] });
      const gateway = jm.connect<{ heartbeatFromJobManager(): Promise<string> }>(te.address, 'taskexecutor');
      h.manager.monitorTarget('te-1', () => gateway.heartbeatFromJobManager());
      await h.advance(INTERVAL);
      await te.close();
      const goneAt = h.clock.now();
      await h.advance(INTERVAL);
      expect(h.timeouts).toHaveLength(1);
      expect(h.timeouts[0]!.atMs).toBe(goneAt + INTERVAL);
      expect(h.timeouts[0]!.cause).toContain('nothing listens');
    } finally {
      await Promise.all([te.close(), jm.close()]);
    }
  });
});
