// The WorkerLauncher contract: what every adapter (in-process, child processes, ECS) promises the ResourceManager.
// Workers under test follow a small protocol set through their env (TEST_WORKER_ENV), implemented both by
// the child-process fixture (test/fixtures/contract-worker.ts) and the in-process one (test/support/test-workers.ts).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError } from '../../runtime/core/errors.js';
import type { WorkerExit, WorkerLauncher, WorkerSpec } from '../../runtime/protocol/worker-launcher.js';

export const TEST_WORKER_ENV = {
  /** 'serve' (default): run until stopped, then exit 0. 'exit': exit by itself. 'check-env': exit 0 if the env is right, else 42. */
  MODE: 'FLOE_TEST_WORKER_MODE',
  EXIT_CODE: 'FLOE_TEST_EXIT_CODE',
  EXIT_AFTER_MS: 'FLOE_TEST_EXIT_AFTER_MS',
  /** check-env: the FLOE_RESOURCE_ID the worker must see. */
  EXPECT_ID: 'FLOE_TEST_EXPECT_ID',
  /** check-env: must equal 'from-spec'. */
  SPEC_VALUE: 'FLOE_TEST_SPEC_VALUE',
} as const;

export async function eventually(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function describeWorkerLauncherContract(name: string, factory: () => Promise<WorkerLauncher>): void {
  describe(`WorkerLauncher contract: ${name}`, () => {
    let launcher: WorkerLauncher;
    let exits: WorkerExit[];
    let seq = 0;
    const id = (): string => `w${seq++}-${process.pid}`;
    const spec = (env: Record<string, string> = {}, kind: WorkerSpec['kind'] = 'taskexecutor'): WorkerSpec => ({ id: id(), kind, env });

    beforeEach(async () => {
      launcher = await factory();
      exits = [];
      launcher.onExit((e) => exits.push(e));
    });
    afterEach(async () => {
      await launcher.close();
      expect(launcher.running()).toEqual([]);
    });

    it('runs a worker until stopped; stop resolves after the exit is reported as requested', async () => {
      const s = spec({}, 'jobmanager');
      await launcher.start(s);
      expect(launcher.running()).toEqual([s.id]);
      await launcher.stop(s.id, 'idle');
      expect(launcher.running()).toEqual([]);
      expect(exits).toHaveLength(1);
      expect(exits[0]).toMatchObject({ id: s.id, kind: 'jobmanager', requested: true });
      // A worker stopped before it could set up its shutdown handling may end by signal (exitCode null).
      expect([0, null]).toContain(exits[0]!.exitCode);
      expect(exits[0]!.reason).toContain('idle');
    });

    it('reports a worker that exits by itself, with its code, as not requested', async () => {
      const s = spec({ [TEST_WORKER_ENV.MODE]: 'exit', [TEST_WORKER_ENV.EXIT_CODE]: '3', [TEST_WORKER_ENV.EXIT_AFTER_MS]: '50' });
      await launcher.start(s);
      await eventually('the worker to exit', () => exits.length === 1);
      expect(exits[0]).toMatchObject({ id: s.id, kind: 'taskexecutor', exitCode: 3, requested: false });
      expect(exits[0]!.reason).toContain('3');
      expect(launcher.running()).toEqual([]);
    });

    it('gives the worker the spec env and its id as FLOE_RESOURCE_ID', async () => {
      const s = spec({ [TEST_WORKER_ENV.MODE]: 'check-env', [TEST_WORKER_ENV.SPEC_VALUE]: 'from-spec' });
      const withExpectation = { ...s, env: { ...s.env, [TEST_WORKER_ENV.EXPECT_ID]: s.id } };
      await launcher.start(withExpectation);
      await eventually('the worker to check its env', () => exits.length === 1);
      expect(exits[0]).toMatchObject({ id: s.id, exitCode: 0, requested: false });
    });

    it('refuses to start a second worker with a running id, and accepts the id again once it exited', async () => {
      const s = spec();
      await launcher.start(s);
      await expect(launcher.start(s)).rejects.toBeInstanceOf(ConflictError);
      expect(launcher.running()).toEqual([s.id]);
      await launcher.stop(s.id, 'done');
      await launcher.start(s);
      expect(launcher.running()).toEqual([s.id]);
    });

    it('of two racing starts with one id exactly one succeeds', async () => {
      const s = spec();
      const results = await Promise.allSettled([launcher.start(s), launcher.start(s)]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(failed?.reason).toBeInstanceOf(ConflictError);
      expect(launcher.running()).toEqual([s.id]);
    });

    it('stopping an unknown or already stopped worker resolves; concurrent stops report one exit', async () => {
      await launcher.stop('never-started', 'why not');
      const s = spec();
      await launcher.start(s);
      await Promise.all([launcher.stop(s.id, 'first'), launcher.stop(s.id, 'second')]);
      await launcher.stop(s.id, 'third');
      expect(exits).toHaveLength(1);
      expect(exits[0]!.requested).toBe(true);
    });

    it('keeps other workers running when one exits, and reports each exit exactly once', async () => {
      const stay1 = spec();
      const leave = spec({ [TEST_WORKER_ENV.MODE]: 'exit', [TEST_WORKER_ENV.EXIT_CODE]: '0' });
      const stay2 = spec();
      await Promise.all([launcher.start(stay1), launcher.start(leave), launcher.start(stay2)]);
      await eventually('one worker to exit', () => exits.length === 1);
      expect(exits[0]).toMatchObject({ id: leave.id, exitCode: 0, requested: false });
      expect(launcher.running().sort()).toEqual([stay1.id, stay2.id].sort());
      await launcher.stop(stay2.id, 'scale down');
      expect(launcher.running()).toEqual([stay1.id]);
      expect(exits.map((e) => e.id)).toEqual([leave.id, stay2.id]);
    });

    it('an unsubscribed listener hears nothing more', async () => {
      const heard: WorkerExit[] = [];
      const off = launcher.onExit((e) => heard.push(e));
      const a = spec();
      await launcher.start(a);
      await launcher.stop(a.id, 'x');
      off();
      const b = spec();
      await launcher.start(b);
      await launcher.stop(b.id, 'y');
      expect(heard.map((e) => e.id)).toEqual([a.id]);
      expect(exits.map((e) => e.id)).toEqual([a.id, b.id]);
    });

    it('close stops every worker and reports each exit as requested', async () => {
      const specs = [spec(), spec(), spec({}, 'jobmanager')];
      for (const s of specs) await launcher.start(s);
      await launcher.close();
      expect(launcher.running()).toEqual([]);
      expect(exits.map((e) => e.id).sort()).toEqual(specs.map((s) => s.id).sort());
      for (const e of exits) expect(e.requested).toBe(true);
    });
  });
}
