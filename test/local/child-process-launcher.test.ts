import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConfigurationError, InvalidRequestError } from '../../runtime/core/errors.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { TASK_EXECUTOR_MALLOC_TUNABLES } from '../../runtime/core/process-env.js';
import { ChildProcessWorkerLauncher } from '../../runtime/local/child-process-launcher.js';
import type { WorkerExit } from '../../runtime/protocol/worker-launcher.js';
import { describeWorkerLauncherContract } from '../contracts/worker-launcher.contract.js';
import { bundleForNode } from '../support/bundle.js';
import { isProcessAlive, killAll, waitUntil } from '../support/process-liveness.js';

const workerEntry = await bundleForNode(fileURLToPath(new URL('../fixtures/contract-worker.ts', import.meta.url)));
const dir = mkdtempSync(join(tmpdir(), 'floe-launcher-'));
const launchers: ChildProcessWorkerLauncher[] = [];
const pids = new Set<number>();

afterAll(async () => {
  await Promise.all(launchers.map((l) => l.close()));
  killAll(pids);
  rmSync(dir, { recursive: true, force: true });
});

function newLauncher(options: Partial<ConstructorParameters<typeof ChildProcessWorkerLauncher>[0]> = {}): ChildProcessWorkerLauncher {
  const l = new ChildProcessWorkerLauncher({ entryFor: () => workerEntry, logDir: join(dir, 'logs'), stopGraceMs: 3_000, logger: silentLogger, ...options });
  launchers.push(l);
  return l;
}

describeWorkerLauncherContract('ChildProcessWorkerLauncher', async () => newLauncher());

describe('ChildProcessWorkerLauncher', () => {
  let launcher: ChildProcessWorkerLauncher;
  afterEach(async () => {
    await launcher?.close();
  });

  it('kills a worker that ignores SIGTERM once the grace period is over', async () => {
    launcher = newLauncher({ stopGraceMs: 300 });
    const exits: WorkerExit[] = [];
    launcher.onExit((e) => exits.push(e));
    await launcher.start({ id: 'stubborn', kind: 'taskexecutor', env: { FLOE_TEST_WORKER_MODE: 'stubborn' } });
    // Wait for its SIGTERM handler, else SIGTERM would end it at once.
    await waitUntil(
      'the worker to install its SIGTERM handler',
      () => existsSync(join(dir, 'logs', 'stubborn.log')) && readFileSync(join(dir, 'logs', 'stubborn.log'), 'utf8').includes('SIGTERM handler installed'),
    );
    expect(launcher.running()).toContain('stubborn');
    const started = Date.now();
    await launcher.stop('stubborn', 'shutdown');
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(exits).toHaveLength(1);
    expect(exits[0]).toMatchObject({ id: 'stubborn', exitCode: null, requested: true });
    expect(exits[0]!.reason).toMatch(/shutdown.*SIGKILL/);
    expect(readFileSync(join(dir, 'logs', 'stubborn.log'), 'utf8')).toContain('ignoring SIGTERM');
  });

  it('appends stdout and stderr to <logDir>/<id>.log across runs', async () => {
    launcher = newLauncher();
    const exits: WorkerExit[] = [];
    launcher.onExit((e) => exits.push(e));
    for (let run = 1; run <= 2; run++) {
      await launcher.start({ id: 'logger', kind: 'taskexecutor', env: { FLOE_TEST_WORKER_MODE: 'exit' } });
      await waitUntil('the worker to exit', () => exits.length === run);
    }
    const log = readFileSync(join(dir, 'logs', 'logger.log'), 'utf8');
    expect(log.match(/worker logger started in mode exit/g)).toHaveLength(2);
    expect(log.match(/says hello on stderr/g)).toHaveLength(2);
  });

  it('layers the environment: own env < options.env < spec.env < FLOE_RESOURCE_ID', async () => {
    const report = join(dir, 'env-report.json');
    launcher = newLauncher({ env: { FROM_OPTIONS: 'o', OVERRIDDEN: 'options' } });
    await launcher.start({
      id: 'env-worker',
      kind: 'jobmanager',
      env: { FLOE_TEST_WORKER_MODE: 'report', FLOE_TEST_REPORT_FILE: report, OVERRIDDEN: 'spec', FLOE_RESOURCE_ID: 'not-this' },
    });
    await waitUntil('the env report', () => existsSync(report));
    const { env } = JSON.parse(readFileSync(report, 'utf8')) as { env: Record<string, string> };
    expect(env['FROM_OPTIONS']).toBe('o');
    expect(env['OVERRIDDEN']).toBe('spec');
    expect(env['FLOE_RESOURCE_ID']).toBe('env-worker');
    expect(env['PATH']).toBe(process.env['PATH']);
  });

  it("starts TaskExecutors with the allocator settings that keep freed memory, JobManagers with the launcher's own", async () => {
    launcher = newLauncher();
    const envOf = async (id: string, kind: 'taskexecutor' | 'jobmanager'): Promise<Record<string, string>> => {
      const report = join(dir, `${id}-report.json`);
      await launcher.start({ id, kind, env: { FLOE_TEST_WORKER_MODE: 'report', FLOE_TEST_REPORT_FILE: report } });
      await waitUntil(`the env report of ${id}`, () => existsSync(report));
      return (JSON.parse(readFileSync(report, 'utf8')) as { env: Record<string, string> }).env;
    };
    expect((await envOf('te-alloc', 'taskexecutor'))['GLIBC_TUNABLES']).toBe(process.env['GLIBC_TUNABLES'] ?? TASK_EXECUTOR_MALLOC_TUNABLES);
    expect((await envOf('jm-alloc', 'jobmanager'))['GLIBC_TUNABLES']).toBe(process.env['GLIBC_TUNABLES']);
  });

  it('rejects an id that cannot name a log file and a missing entry point', async () => {
    launcher = newLauncher();
    await expect(launcher.start({ id: '../escape', kind: 'taskexecutor', env: {} })).rejects.toBeInstanceOf(InvalidRequestError);
    const missing = newLauncher({ entryFor: () => join(dir, 'nope.js') });
    await expect(missing.start({ id: 'x', kind: 'taskexecutor', env: {} })).rejects.toBeInstanceOf(ConfigurationError);
    expect(missing.running()).toEqual([]);
  });

  async function orphanAfterParentKill(exitWithParent: boolean, waitMs: number): Promise<{ workerPid: number; survived: boolean }> {
    const parentEntry = await bundleForNode(fileURLToPath(new URL('../fixtures/launcher-parent.ts', import.meta.url)));
    const report = join(dir, `orphan-${exitWithParent}.json`);
    const parent = spawn(process.execPath, [parentEntry], {
      stdio: 'ignore',
      env: {
        ...process.env,
        FLOE_TEST_WORKER_ENTRY: workerEntry,
        FLOE_TEST_LOG_DIR: join(dir, `orphan-logs-${exitWithParent}`),
        FLOE_TEST_REPORT_FILE: report,
        FLOE_TEST_EXIT_WITH_PARENT: String(exitWithParent),
      },
    });
    pids.add(parent.pid!);
    const parentGone = new Promise((r) => parent.once('exit', r));
    await waitUntil('the worker to report its pid', () => existsSync(report));
    const workerPid = (JSON.parse(readFileSync(report, 'utf8')) as { pid: number }).pid;
    pids.add(workerPid);
    expect(isProcessAlive(workerPid)).toBe(true);
    parent.kill('SIGKILL');
    await parentGone;
    let survived = true;
    try {
      await waitUntil('the orphaned worker to exit', () => !isProcessAlive(workerPid), waitMs);
      survived = false;
    } catch {
      // still alive after waitMs
    }
    return { workerPid, survived };
  }

  it('a worker does not outlive a launcher process that was SIGKILLed', async () => {
    const { survived } = await orphanAfterParentKill(true, 5_000);
    expect(survived).toBe(false);
  });

  it('without exitWithParent the same worker is orphaned (the guard is what ends it)', async () => {
    const { workerPid, survived } = await orphanAfterParentKill(false, 1_500);
    expect(survived).toBe(true);
    process.kill(workerPid, 'SIGKILL');
    await waitUntil('the orphan to die', () => !isProcessAlive(workerPid));
  });
});
